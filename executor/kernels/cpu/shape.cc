// CPU kernels for reshape, transpose, slice, split, concat and their
// gradients. They only move bytes, so they work for every dtype.
#include <algorithm>
#include <cstring>

#include "executor/kernels/cpu/cpu_helpers.h"
#include "executor/kernels/kernel_shapes.h"
#include "framework/ops/op_helpers.h"

namespace loom {
namespace {

std::vector<int64_t> RowMajorStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * shape[d + 1];
  }
  return strides;
}

// Copies a box of `box` elements from a tensor of shape `src_shape`, starting
// at element index `src_start`, into one of shape `dst_shape` at `dst_start`.
// slice, split, concat and their gradients are all this copy.
void CopyBox(const void* src, Shape src_shape, std::vector<int64_t> src_start,
             void* dst, Shape dst_shape, std::vector<int64_t> dst_start,
             Shape box, int64_t elem_size) {
  if (NumElements(box) == 0) return;
  // Trailing dims the box covers in full, in both tensors, are folded into
  // the dim before them: fewer and longer memcpys.
  while (box.size() > 1) {
    const size_t d = box.size() - 1;
    if (box[d] != src_shape[d] || box[d] != dst_shape[d]) break;
    src_start[d - 1] *= src_shape[d];
    dst_start[d - 1] *= dst_shape[d];
    src_shape[d - 1] *= src_shape[d];
    dst_shape[d - 1] *= dst_shape[d];
    box[d - 1] *= box[d];
    for (auto* v : {&src_shape, &dst_shape, &box, &src_start, &dst_start}) {
      v->pop_back();
    }
  }
  const auto* s = static_cast<const uint8_t*>(src);
  auto* t = static_cast<uint8_t*>(dst);
  const int rank = static_cast<int>(box.size());
  if (rank == 0) {
    std::memcpy(t, s, elem_size);
    return;
  }
  const auto ss = RowMajorStrides(src_shape);
  const auto ds = RowMajorStrides(dst_shape);
  int64_t so = 0, dof = 0;
  for (int d = 0; d < rank; ++d) {
    so += src_start[d] * ss[d];
    dof += dst_start[d] * ds[d];
  }
  const int64_t run = box[rank - 1] * elem_size;
  const int64_t rows = NumElements(box) / box[rank - 1];
  std::vector<int64_t> idx(rank, 0);
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(t + dof * elem_size, s + so * elem_size, run);
    // Odometer over the outer dims.
    for (int d = rank - 2; d >= 0; --d) {
      ++idx[d];
      so += ss[d];
      dof += ds[d];
      if (idx[d] < box[d]) break;
      so -= ss[d] * box[d];
      dof -= ds[d] * box[d];
      idx[d] = 0;
    }
  }
}

void CopyAll(const Tensor& src, Tensor* dst) {
  if (src.raw_data() != dst->raw_data()) {
    std::memcpy(dst->raw_data(), src.raw_data(), src.bytes());
  }
}

Status ReshapeKernel(const KernelContext& ctx) {
  CopyAll(ctx.Input("X"), ctx.Output("Out"));
  return Status::OK();
}

Status ReshapeGradKernel(const KernelContext& ctx) {
  CopyAll(ctx.Input("Out@GRAD"), ctx.Output("X@GRAD"));
  return Status::OK();
}

template <typename T>
void TransposeImpl(const T* in, const Shape& in_shape,
                   const std::vector<int32_t>& perm, T* out) {
  const int rank = static_cast<int>(perm.size());
  const int64_t n = NumElements(in_shape);
  if (rank == 0) {
    if (n == 1) out[0] = in[0];
    return;
  }
  const auto in_strides = RowMajorStrides(in_shape);
  Shape out_shape(rank);
  std::vector<int64_t> strides(rank);  // of `in`, walked in `out` order
  for (int k = 0; k < rank; ++k) {
    out_shape[k] = in_shape[perm[k]];
    strides[k] = in_strides[perm[k]];
  }
  if (n == 0) return;
  const int64_t inner = out_shape[rank - 1];
  const int64_t inner_stride = strides[rank - 1];
  std::vector<int64_t> idx(rank, 0);
  int64_t offset = 0;
  for (int64_t i = 0; i < n; i += inner) {
    for (int64_t j = 0; j < inner; ++j)
      out[i + j] = in[offset + j * inner_stride];
    for (int d = rank - 2; d >= 0; --d) {
      ++idx[d];
      offset += strides[d];
      if (idx[d] < out_shape[d]) break;
      offset -= strides[d] * out_shape[d];
      idx[d] = 0;
    }
  }
}

Status TransposeKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  Tensor* out = ctx.Output("Out");
  const auto perm = ctx.Attr<std::vector<int32_t>>("perm");
  // Dispatch on the element size only: a transpose never looks at values.
  switch (SizeOf(x.dtype())) {
    case 1:
      TransposeImpl(static_cast<const uint8_t*>(x.raw_data()), x.shape(), perm,
                    static_cast<uint8_t*>(out->raw_data()));
      break;
    case 2:
      TransposeImpl(static_cast<const uint16_t*>(x.raw_data()), x.shape(), perm,
                    static_cast<uint16_t*>(out->raw_data()));
      break;
    case 4:
      TransposeImpl(static_cast<const uint32_t*>(x.raw_data()), x.shape(), perm,
                    static_cast<uint32_t*>(out->raw_data()));
      break;
    case 8:
      TransposeImpl(static_cast<const uint64_t*>(x.raw_data()), x.shape(), perm,
                    static_cast<uint64_t*>(out->raw_data()));
      break;
    default:
      return Unimplemented("transpose of ", DataTypeName(x.dtype()));
  }
  return Status::OK();
}

Status SliceKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  Tensor* out = ctx.Output("Out");
  CopyBox(x.raw_data(), x.shape(), SliceStarts(ctx, x.shape()), out->raw_data(),
          out->shape(), std::vector<int64_t>(out->rank(), 0), out->shape(),
          SizeOf(x.dtype()));
  return Status::OK();
}

Status SliceGradKernel(const KernelContext& ctx) {
  const Tensor& dout = ctx.Input("Out@GRAD");
  Tensor* dx = ctx.Output("X@GRAD");
  std::memset(dx->raw_data(), 0, dx->bytes());
  CopyBox(dout.raw_data(), dout.shape(), std::vector<int64_t>(dout.rank(), 0),
          dx->raw_data(), dx->shape(), SliceStarts(ctx, dx->shape()),
          dout.shape(), SizeOf(dout.dtype()));
  return Status::OK();
}

// Where each part starts in the whole that split cuts up or concat joins:
// parts follow one another along `axis`.
std::vector<std::vector<int64_t>> PartStarts(const std::vector<Shape>& parts,
                                             int axis, int rank) {
  std::vector<std::vector<int64_t>> starts;
  std::vector<int64_t> at(rank, 0);
  for (const Shape& part : parts) {
    starts.push_back(at);
    at[axis] += part[axis];
  }
  return starts;
}

Status SplitKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  LOOM_ASSIGN_OR_RETURN(int axis,
                        NormalizeAxis(ctx.Attr<int32_t>("axis"), x.rank()));
  // The parts' shapes (a pruned part has no tensor to read its shape from).
  const std::vector<Shape> shapes = SplitShapes(ctx, x, axis);
  const auto starts = PartStarts(shapes, axis, x.rank());
  const std::vector<int64_t> zero(x.rank(), 0);
  for (int i = 0; i < static_cast<int>(shapes.size()); ++i) {
    if (!ctx.HasOutput("Out", i)) continue;
    CopyBox(x.raw_data(), x.shape(), starts[i],
            ctx.Output("Out", i)->raw_data(), shapes[i], zero, shapes[i],
            SizeOf(x.dtype()));
  }
  return Status::OK();
}

Status ConcatKernel(const KernelContext& ctx) {
  Tensor* out = ctx.Output("Out");
  LOOM_ASSIGN_OR_RETURN(int axis,
                        NormalizeAxis(ctx.Attr<int32_t>("axis"), out->rank()));
  std::vector<Shape> shapes;
  for (int i = 0; i < ctx.InputCount("X"); ++i) {
    shapes.push_back(ctx.Input("X", i).shape());
  }
  const auto starts = PartStarts(shapes, axis, out->rank());
  const std::vector<int64_t> zero(out->rank(), 0);
  for (int i = 0; i < static_cast<int>(shapes.size()); ++i) {
    CopyBox(ctx.Input("X", i).raw_data(), shapes[i], zero, out->raw_data(),
            out->shape(), starts[i], shapes[i], SizeOf(out->dtype()));
  }
  return Status::OK();
}

// Runs only where the parts were not written in place (OpJoinOf declined).
Status FlatConcatKernel(const KernelContext& ctx) {
  auto* out = static_cast<uint8_t*>(ctx.Output("Out")->raw_data());
  for (int i = 0; i < ctx.InputCount("X"); ++i) {
    const Tensor& x = ctx.Input("X", i);
    std::memcpy(out, x.raw_data(), x.bytes());
    out += x.bytes();
  }
  return Status::OK();
}

// Runs only where flat_split cannot be a view (a persistable output).
Status FlatSplitKernel(const KernelContext& ctx) {
  const auto offsets = ctx.Attr<std::vector<int64_t>>("offsets");
  const Tensor& x = ctx.Input("X");
  const auto* in = static_cast<const uint8_t*>(x.raw_data());
  for (int i = 0; i < ctx.OutputCount("Out"); ++i) {
    Tensor* out = ctx.Output("Out", i);
    std::memcpy(out->raw_data(), in + offsets[i] * SizeOf(x.dtype()), out->bytes());
  }
  return Status::OK();
}

Status ConcatGradKernel(const KernelContext& ctx) {
  const Tensor& dout = ctx.Input("Out@GRAD");
  LOOM_ASSIGN_OR_RETURN(int axis,
                        NormalizeAxis(ctx.Attr<int32_t>("axis"), dout.rank()));
  std::vector<Shape> shapes;
  for (int i = 0; i < ctx.InputCount("X"); ++i) {
    shapes.push_back(ctx.Input("X", i).shape());  // meta only
  }
  const auto starts = PartStarts(shapes, axis, dout.rank());
  const std::vector<int64_t> zero(dout.rank(), 0);
  for (int i = 0; i < static_cast<int>(shapes.size()); ++i) {
    if (!ctx.HasOutput("X@GRAD", i)) continue;
    CopyBox(dout.raw_data(), dout.shape(), starts[i],
            ctx.Output("X@GRAD", i)->raw_data(), shapes[i], zero, shapes[i],
            SizeOf(dout.dtype()));
  }
  return Status::OK();
}

}  // namespace

void RegisterShapeCpuKernels() {
  auto& r = KernelRegistry::Cpu();
  r.Register("reshape", ReshapeKernel);
  r.Register("reshape_grad", ReshapeGradKernel);
  r.Register("transpose", TransposeKernel);
  r.Register("slice", SliceKernel);
  r.Register("slice_grad", SliceGradKernel);
  r.Register("split", SplitKernel);
  r.Register("concat", ConcatKernel);
  r.Register("flat_concat", FlatConcatKernel);
  r.Register("flat_split", FlatSplitKernel);
  r.Register("concat_grad", ConcatGradKernel);
}

}  // namespace loom
