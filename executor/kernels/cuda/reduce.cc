// CUDA kernels for reduce_sum / reduce_mean and their gradients (host
// side): the reduction of elementwise.cu, accumulated in double like the
// CPU kernels, on fp32, bf16 and fp16 (a low-precision result is the
// double sum rounded to float, then to its dtype, as the CPU's is).
#include "executor/kernels/cuda/cuda_kernel_helpers.h"
#include "framework/ops/op_helpers.h"

namespace loom {
namespace {

// X's shape with the reduced dims set to 1.
StatusOr<Shape> KeptShape(const KernelContext& ctx, const Shape& x) {
  LOOM_ASSIGN_OR_RETURN(
      auto dims, NormalizeReduceDims(ctx.Attr<std::vector<int32_t>>("dims"),
                                     ctx.Attr<bool>("reduce_all"), static_cast<int>(x.size())));
  Shape kept = x;
  for (int d : dims) kept[d] = 1;
  return kept;
}

Status Reduce(const KernelContext& ctx, bool mean) {
  const Tensor& x = ctx.Input("X");
  Tensor* out = ctx.Output("Out");
  LOOM_ASSIGN_OR_RETURN(cuda::FloatType t, FloatTypeOf(ctx, {&x, out}));
  LOOM_ASSIGN_OR_RETURN(Shape kept, KeptShape(ctx, x.shape()));
  LOOM_ASSIGN_OR_RETURN(cuda::ReducePlan plan, ReducePlanFor(x.shape(), kept, nullptr));
  const double scale = mean ? static_cast<double>(out->numel()) / x.numel() : 1.0;
  std::shared_ptr<void> scratch;
  const int64_t bytes = cuda::ReduceScratchBytes(plan, /*in_double=*/true);
  if (bytes > 0) {
    LOOM_ASSIGN_OR_RETURN(scratch, Scratch(ctx, bytes));
  }
  cuda::LaunchReduce(t, plan, x.raw_data(), nullptr, out->raw_data(), scale, /*in_double=*/true,
                     scratch.get(), NativeStream(ctx));
  return LastLaunchStatus(ctx.type());
}

// dX = dOut broadcast back over the reduced dims (times 1/count for mean).
Status ReduceGrad(const KernelContext& ctx, bool mean) {
  const Tensor& x = ctx.Input("X");  // meta only
  const Tensor& dout = ctx.Input("Out@GRAD");
  Tensor* dx = ctx.Output("X@GRAD");
  LOOM_ASSIGN_OR_RETURN(cuda::FloatType t, FloatTypeOf(ctx, {&dout, dx}));
  LOOM_ASSIGN_OR_RETURN(Shape kept, KeptShape(ctx, x.shape()));
  const float scale =
      mean ? static_cast<float>(static_cast<double>(dout.numel()) / x.numel()) : 1.0f;
  LOOM_ASSIGN_OR_RETURN(cuda::BroadcastIndex index, BroadcastIndexFor(x.shape(), kept, kept));
  cuda::LaunchBinary(t, cuda::kScaleX, dout.raw_data(), nullptr, dx->raw_data(), x.numel(), &index,
                     scale, NativeStream(ctx));
  return LastLaunchStatus(ctx.type());
}

Status ReduceSumKernel(const KernelContext& ctx) { return Reduce(ctx, false); }
Status ReduceMeanKernel(const KernelContext& ctx) { return Reduce(ctx, true); }
Status ReduceSumGradKernel(const KernelContext& ctx) { return ReduceGrad(ctx, false); }
Status ReduceMeanGradKernel(const KernelContext& ctx) { return ReduceGrad(ctx, true); }

}  // namespace

void RegisterReduceCudaKernels() {
  auto& r = KernelRegistry::Cuda();
  r.Register("reduce_sum", ReduceSumKernel, LowPrecision::kNative);
  r.Register("reduce_mean", ReduceMeanKernel, LowPrecision::kNative);
  r.Register("reduce_sum_grad", ReduceSumGradKernel, LowPrecision::kNative);
  r.Register("reduce_mean_grad", ReduceMeanGradKernel, LowPrecision::kNative);
}

}  // namespace loom
