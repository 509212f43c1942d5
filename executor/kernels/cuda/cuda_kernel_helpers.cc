#include "executor/kernels/cuda/cuda_kernel_helpers.h"

#include <cstdint>

#include "executor/kernels/cpu/cpu_helpers.h"

namespace loom {
namespace {

Status TooManyDims(const Shape& shape) {
  return Unimplemented("a CUDA kernel walks at most ", cuda::kMaxDims,
                       " non-contiguous dims; shape ", ShapeToString(shape), " needs ",
                       shape.size());
}

void Fill(const std::vector<int64_t>& from, int64_t* to) {
  for (size_t d = 0; d < from.size(); ++d) to[d] = from[d];
}

}  // namespace

cudaStream_t NativeStream(const KernelContext& ctx) {
  CHECK(ctx.stream() != nullptr) << ctx.type() << ": a CUDA kernel needs its stream";
  return static_cast<CudaStream*>(ctx.stream())->native();
}

// The launchers' codes are the proto's values, so a dtype converts by value.
static_assert(int{cuda::kFp32} == int{proto::FP32} && int{cuda::kFp16} == int{proto::FP16} &&
              int{cuda::kBf16} == int{proto::BF16});

cuda::FloatType FloatTypeOf(DataType dtype) {
  CHECK(IsComputeFloat(dtype)) << DataTypeName(dtype) << " is not a float kernels compute on";
  return static_cast<cuda::FloatType>(dtype);
}

StatusOr<cuda::FloatType> FloatTypeOf(const KernelContext& ctx,
                                      std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (t == nullptr) continue;
    if (!IsComputeFloat(t->dtype())) {
      return Unimplemented(ctx.type(), " of ", DataTypeName(t->dtype()), " on CUDA");
    }
    if (first == nullptr) {
      first = t;
    } else if (t->dtype() != first->dtype()) {
      return Unimplemented(ctx.type(), " on CUDA of ", DataTypeName(first->dtype()), " and ",
                           DataTypeName(t->dtype()), " tensors together");
    }
  }
  CHECK(first != nullptr) << ctx.type() << ": no tensor to take a float type from";
  return static_cast<cuda::FloatType>(first->dtype());
}

StatusOr<std::shared_ptr<void>> Scratch(const KernelContext& ctx, int64_t bytes) {
  if (ctx.device() == nullptr) {
    return FailedPrecondition(ctx.type(), ": scratch memory needs the kernel's device");
  }
  return ctx.device()->Allocate(bytes, ctx.stream());
}

Status CopyOnDevice(const KernelContext& ctx, void* dst, const void* src, int64_t bytes) {
  if (dst == src || bytes == 0) return Status::OK();
  return CudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, NativeStream(ctx)),
                    ctx.type() + ": device copy");
}

Status ZeroOnDevice(const KernelContext& ctx, void* dst, int64_t bytes) {
  if (bytes == 0) return Status::OK();
  return CudaStatus(cudaMemsetAsync(dst, 0, bytes, NativeStream(ctx)),
                    ctx.type() + ": device memset");
}

StatusOr<int64_t> FirstOutOfRange(const KernelContext& ctx, const int64_t* v, int64_t n, int64_t lo,
                                  int64_t hi, bool has_skip, int64_t skip, int64_t* value) {
  if (n == 0) return int64_t{-1};
  LOOM_ASSIGN_OR_RETURN(std::shared_ptr<void> first, Scratch(ctx, sizeof(uint64_t)));
  auto* p = static_cast<unsigned long long*>(first.get());
  cuda::LaunchFirstOutOfRange(v, n, lo, hi, has_skip, skip, p, NativeStream(ctx));
  LOOM_RETURN_IF_ERROR(LastLaunchStatus(ctx.type() + " index check"));
  unsigned long long host = 0;
  LOOM_RETURN_IF_ERROR(ctx.device()->CopyToHost(&host, p, sizeof(host), ctx.stream()));
  if (host == ~0ull) return int64_t{-1};
  const auto i = static_cast<int64_t>(host);
  LOOM_RETURN_IF_ERROR(ctx.device()->CopyToHost(value, v + i, sizeof(int64_t), ctx.stream()));
  return i;
}

std::vector<int64_t> ContiguousStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * shape[d + 1];
  }
  return strides;
}

void FoldDims(Shape* shape, const std::vector<std::vector<int64_t>*>& strides) {
  Shape out;
  std::vector<std::vector<int64_t>> outs(strides.size());
  for (size_t d = 0; d < shape->size(); ++d) {
    const int64_t size = (*shape)[d];
    if (size == 1) continue;
    bool merge = !out.empty();
    for (size_t k = 0; merge && k < strides.size(); ++k) {
      merge = outs[k].back() == (*strides[k])[d] * size;
    }
    if (merge) {
      out.back() *= size;
      for (size_t k = 0; k < strides.size(); ++k) outs[k].back() = (*strides[k])[d];
    } else {
      out.push_back(size);
      for (size_t k = 0; k < strides.size(); ++k) outs[k].push_back((*strides[k])[d]);
    }
  }
  *shape = out;
  for (size_t k = 0; k < strides.size(); ++k) *strides[k] = outs[k];
}

StatusOr<cuda::BroadcastIndex> BroadcastIndexFor(const Shape& out, const Shape& x, const Shape& y) {
  Shape shape = out;
  std::vector<int64_t> sx = BroadcastStrides(x, out), sy = BroadcastStrides(y, out);
  FoldDims(&shape, {&sx, &sy});
  if (shape.size() > static_cast<size_t>(cuda::kMaxDims)) return TooManyDims(out);
  cuda::BroadcastIndex index;
  index.rank = static_cast<int>(shape.size());
  Fill(shape, index.shape);
  Fill(sx, index.sx);
  Fill(sy, index.sy);
  return index;
}

StatusOr<cuda::ReducePlan> ReducePlanFor(const Shape& full, const Shape& target,
                                         const Shape* factor) {
  const std::vector<int64_t> g = ContiguousStrides(full);
  const std::vector<int64_t> t = BroadcastStrides(target, full);
  const std::vector<int64_t> f =
      factor ? BroadcastStrides(*factor, full) : std::vector<int64_t>(full.size(), 0);
  // Kept dims are the target's own (it is contiguous over them, in order);
  // the rest are summed over.
  Shape kept, red;
  std::vector<int64_t> kg, kf, rg, rf;
  for (size_t d = 0; d < full.size(); ++d) {
    if (full[d] == 1) continue;
    const bool keep = t[d] != 0;
    (keep ? kept : red).push_back(full[d]);
    (keep ? kg : rg).push_back(g[d]);
    (keep ? kf : rf).push_back(f[d]);
  }
  FoldDims(&kept, {&kg, &kf});
  FoldDims(&red, {&rg, &rf});
  if (kept.size() > static_cast<size_t>(cuda::kMaxDims) ||
      red.size() > static_cast<size_t>(cuda::kMaxDims)) {
    return TooManyDims(full);
  }
  cuda::ReducePlan plan;
  plan.kept_rank = static_cast<int>(kept.size());
  plan.red_rank = static_cast<int>(red.size());
  Fill(kept, plan.kept_shape);
  Fill(kg, plan.kept_g);
  Fill(kf, plan.kept_f);
  Fill(red, plan.red_shape);
  Fill(rg, plan.red_g);
  Fill(rf, plan.red_f);
  plan.kept_count = NumElements(target);
  plan.red_count = NumElements(red);
  return plan;
}

StatusOr<cuda::CopyPlan> CopyPlanFor(Shape shape, std::vector<int64_t> src_stride,
                                     std::vector<int64_t> dst_stride, int64_t src_offset,
                                     int64_t dst_offset) {
  const Shape original = shape;
  FoldDims(&shape, {&src_stride, &dst_stride});
  if (shape.size() > static_cast<size_t>(cuda::kMaxDims)) return TooManyDims(original);
  cuda::CopyPlan plan;
  plan.rank = static_cast<int>(shape.size());
  Fill(shape, plan.shape);
  Fill(src_stride, plan.src_stride);
  Fill(dst_stride, plan.dst_stride);
  plan.src_offset = src_offset;
  plan.dst_offset = dst_offset;
  return plan;
}

Status RunCopy(const KernelContext& ctx, const void* src, void* dst, const cuda::CopyPlan& plan,
               int elem_size, const std::string& what) {
  const bool contiguous =
      plan.rank == 0 || (plan.rank == 1 && plan.src_stride[0] == 1 && plan.dst_stride[0] == 1);
  if (contiguous) {
    const int64_t n = plan.rank == 0 ? 1 : plan.shape[0];
    return CopyOnDevice(ctx, static_cast<uint8_t*>(dst) + plan.dst_offset * elem_size,
                        static_cast<const uint8_t*>(src) + plan.src_offset * elem_size,
                        n * elem_size);
  }
  cuda::LaunchStridedCopy(src, dst, plan, elem_size, NativeStream(ctx));
  return LastLaunchStatus(what);
}

}  // namespace loom
