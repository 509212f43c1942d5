// CUDA kernels for reshape, transpose, slice, split, concat and their
// gradients (host side). They only move bytes, element by element at the
// dtype's size, so they work for every dtype (bf16 and fp16 included:
// registered kNative): whole tensors by cudaMemcpyAsync, the rest by the
// strided copy of shape.cu (one memcpy where the dims fold to one
// contiguous run).
#include <algorithm>

#include "executor/kernels/cuda/cuda_kernel_helpers.h"
#include "executor/kernels/kernel_shapes.h"
#include "framework/ops/op_helpers.h"

namespace loom {
namespace {

Status CheckElemSize(const KernelContext& ctx, DataType dtype) {
  const int64_t size = SizeOf(dtype);
  if (size == 1 || size == 2 || size == 4 || size == 8) return Status::OK();
  return Unimplemented(ctx.type(), " of ", DataTypeName(dtype));
}

// Copies a box of shape `box` from `src` (shape src_shape) at `src_start`
// into `dst` (shape dst_shape) at `dst_start`, as the CPU's CopyBox.
Status CopyBox(const KernelContext& ctx, const void* src, const Shape& src_shape,
               const std::vector<int64_t>& src_start, void* dst, const Shape& dst_shape,
               const std::vector<int64_t>& dst_start, const Shape& box, DataType dtype) {
  if (NumElements(box) == 0) return Status::OK();
  LOOM_RETURN_IF_ERROR(CheckElemSize(ctx, dtype));
  const std::vector<int64_t> ss = ContiguousStrides(src_shape);
  const std::vector<int64_t> ds = ContiguousStrides(dst_shape);
  int64_t so = 0, dof = 0;
  for (size_t d = 0; d < box.size(); ++d) {
    so += src_start[d] * ss[d];
    dof += dst_start[d] * ds[d];
  }
  LOOM_ASSIGN_OR_RETURN(cuda::CopyPlan plan, CopyPlanFor(box, ss, ds, so, dof));
  return RunCopy(ctx, src, dst, plan, static_cast<int>(SizeOf(dtype)), ctx.type());
}

Status ReshapeKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  return CopyOnDevice(ctx, ctx.Output("Out")->raw_data(), x.raw_data(), x.bytes());
}

Status ReshapeGradKernel(const KernelContext& ctx) {
  const Tensor& dout = ctx.Input("Out@GRAD");
  return CopyOnDevice(ctx, ctx.Output("X@GRAD")->raw_data(), dout.raw_data(), dout.bytes());
}

Status TransposeKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  Tensor* out = ctx.Output("Out");
  const auto perm = ctx.Attr<std::vector<int32_t>>("perm");
  if (!CheckElemSize(ctx, x.dtype()).ok()) {
    return Unimplemented("transpose of ", DataTypeName(x.dtype()));
  }
  if (x.numel() == 0) return Status::OK();
  // Walk the output in order, reading X at its permuted strides.
  const std::vector<int64_t> in_strides = ContiguousStrides(x.shape());
  Shape out_shape(perm.size());
  std::vector<int64_t> src_stride(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) {
    out_shape[k] = x.shape()[perm[k]];
    src_stride[k] = in_strides[perm[k]];
  }
  LOOM_ASSIGN_OR_RETURN(cuda::CopyPlan plan,
                        CopyPlanFor(out_shape, src_stride, ContiguousStrides(out_shape), 0, 0));
  return RunCopy(ctx, x.raw_data(), out->raw_data(), plan, static_cast<int>(SizeOf(x.dtype())),
                 "transpose");
}

Status SliceKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  Tensor* out = ctx.Output("Out");
  return CopyBox(ctx, x.raw_data(), x.shape(), SliceStarts(ctx, x.shape()), out->raw_data(),
                 out->shape(), std::vector<int64_t>(out->rank(), 0), out->shape(), x.dtype());
}

Status SliceGradKernel(const KernelContext& ctx) {
  const Tensor& dout = ctx.Input("Out@GRAD");
  Tensor* dx = ctx.Output("X@GRAD");
  LOOM_RETURN_IF_ERROR(ZeroOnDevice(ctx, dx->raw_data(), dx->bytes()));
  return CopyBox(ctx, dout.raw_data(), dout.shape(), std::vector<int64_t>(dout.rank(), 0),
                 dx->raw_data(), dx->shape(), SliceStarts(ctx, dx->shape()), dout.shape(),
                 dout.dtype());
}

// Where each part starts in the whole that split cuts up or concat joins.
std::vector<std::vector<int64_t>> PartStarts(const std::vector<Shape>& parts, int axis, int rank) {
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
  LOOM_ASSIGN_OR_RETURN(int axis, NormalizeAxis(ctx.Attr<int32_t>("axis"), x.rank()));
  // The parts' shapes, as shape inference computed them.
  const std::vector<Shape> shapes = SplitShapes(ctx, x, axis);
  const auto starts = PartStarts(shapes, axis, x.rank());
  const std::vector<int64_t> zero(x.rank(), 0);
  for (int i = 0; i < static_cast<int>(shapes.size()); ++i) {
    if (!ctx.HasOutput("Out", i)) continue;
    LOOM_RETURN_IF_ERROR(CopyBox(ctx, x.raw_data(), x.shape(), starts[i],
                                 ctx.Output("Out", i)->raw_data(), shapes[i], zero, shapes[i],
                                 x.dtype()));
  }
  return Status::OK();
}

Status ConcatKernel(const KernelContext& ctx) {
  Tensor* out = ctx.Output("Out");
  LOOM_ASSIGN_OR_RETURN(int axis, NormalizeAxis(ctx.Attr<int32_t>("axis"), out->rank()));
  std::vector<Shape> shapes;
  for (int i = 0; i < ctx.InputCount("X"); ++i) shapes.push_back(ctx.Input("X", i).shape());
  const auto starts = PartStarts(shapes, axis, out->rank());
  const std::vector<int64_t> zero(out->rank(), 0);
  for (int i = 0; i < static_cast<int>(shapes.size()); ++i) {
    LOOM_RETURN_IF_ERROR(CopyBox(ctx, ctx.Input("X", i).raw_data(), shapes[i], zero,
                                 out->raw_data(), out->shape(), starts[i], shapes[i],
                                 out->dtype()));
  }
  return Status::OK();
}

// Runs only where the parts were not written in place (OpJoinOf declined).
Status FlatConcatKernel(const KernelContext& ctx) {
  auto* out = static_cast<uint8_t*>(ctx.Output("Out")->raw_data());
  for (int i = 0; i < ctx.InputCount("X"); ++i) {
    const Tensor& x = ctx.Input("X", i);
    LOOM_RETURN_IF_ERROR(CopyOnDevice(ctx, out, x.raw_data(), x.bytes()));
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
    LOOM_RETURN_IF_ERROR(
        CopyOnDevice(ctx, out->raw_data(), in + offsets[i] * SizeOf(x.dtype()), out->bytes()));
  }
  return Status::OK();
}

Status ConcatGradKernel(const KernelContext& ctx) {
  const Tensor& dout = ctx.Input("Out@GRAD");
  LOOM_ASSIGN_OR_RETURN(int axis, NormalizeAxis(ctx.Attr<int32_t>("axis"), dout.rank()));
  std::vector<Shape> shapes;
  for (int i = 0; i < ctx.InputCount("X"); ++i) {
    shapes.push_back(ctx.Input("X", i).shape());  // meta only
  }
  const auto starts = PartStarts(shapes, axis, dout.rank());
  const std::vector<int64_t> zero(dout.rank(), 0);
  for (int i = 0; i < static_cast<int>(shapes.size()); ++i) {
    if (!ctx.HasOutput("X@GRAD", i)) continue;
    LOOM_RETURN_IF_ERROR(CopyBox(ctx, dout.raw_data(), dout.shape(), starts[i],
                                 ctx.Output("X@GRAD", i)->raw_data(), shapes[i], zero, shapes[i],
                                 dout.dtype()));
  }
  return Status::OK();
}

}  // namespace

void RegisterShapeCudaKernels() {
  auto& r = KernelRegistry::Cuda();
  r.Register("reshape", ReshapeKernel, LowPrecision::kNative);
  r.Register("reshape_grad", ReshapeGradKernel, LowPrecision::kNative);
  r.Register("transpose", TransposeKernel, LowPrecision::kNative);
  r.Register("slice", SliceKernel, LowPrecision::kNative);
  r.Register("slice_grad", SliceGradKernel, LowPrecision::kNative);
  r.Register("split", SplitKernel, LowPrecision::kNative);
  r.Register("concat", ConcatKernel, LowPrecision::kNative);
  r.Register("flat_concat", FlatConcatKernel, LowPrecision::kNative);
  r.Register("flat_split", FlatSplitKernel, LowPrecision::kNative);
  r.Register("concat_grad", ConcatGradKernel, LowPrecision::kNative);
}

}  // namespace loom
