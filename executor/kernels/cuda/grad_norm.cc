// CUDA kernels for squared_l2_norm and grad_scale (host side). The ranges
// summed are the CPU kernel's (framework/grad_clip.h, LocalNormRanges); the
// sum and the scale stay on the device.
#include "executor/kernels/cuda/cuda_kernel_helpers.h"
#include "framework/grad_clip.h"

namespace loom {
namespace {

Status SquaredL2NormKernel(const KernelContext& ctx) {
  std::vector<int64_t> sizes;
  for (int i = 0; i < ctx.InputCount("X"); ++i) {
    const Tensor& x = ctx.Input("X", i);
    if (x.dtype() != proto::FP32) {
      return Unimplemented("squared_l2_norm of ", DataTypeName(x.dtype()), " X[", i, "]");
    }
    sizes.push_back(x.numel());
  }
  LOOM_ASSIGN_OR_RETURN(const std::vector<NormRange> ranges,
                        LocalNormRanges(ctx.desc(), sizes, ctx.run().ring_index));
  // One double for the sum, then the blocks' partial sums.
  LOOM_ASSIGN_OR_RETURN(std::shared_ptr<void> scratch,
                        Scratch(ctx, (1 + cuda::kNormBlocks) * sizeof(double)));
  double* sum = static_cast<double*>(scratch.get());
  cudaStream_t s = NativeStream(ctx);
  cuda::LaunchClearSum(sum, s);
  for (const NormRange& r : ranges) {
    cuda::LaunchAddSquares(ctx.Input("X", r.input).data<float>() + r.begin, r.end - r.begin,
                           sum + 1, sum, s);
  }
  cuda::LaunchStoreSum(sum, ctx.Output("Out")->data<float>(), s);
  return LastLaunchStatus("squared_l2_norm");
}

Status GradScaleKernel(const KernelContext& ctx) {
  cuda::LaunchGradScale(
      ctx.Input("SquaredNorm").data<float>(),
      ctx.HasInput("LossScale") ? ctx.Input("LossScale").data<float>() : nullptr,
      ctx.Attr<float>("max_norm"), ctx.Output("Scale")->data<float>(),
      ctx.HasOutput("Norm") ? ctx.Output("Norm")->data<float>() : nullptr, NativeStream(ctx));
  return LastLaunchStatus("grad_scale");
}

Status UpdateLossScaleKernel(const KernelContext& ctx) {
  cuda::LaunchUpdateLossScale(
      ctx.Input("SquaredNorm").data<float>(), ctx.Attr<int64_t>("growth_interval"),
      ctx.Input("LossScale").data<float>(), ctx.Input("GoodSteps").data<int64_t>(),
      ctx.Output("LossScaleOut")->data<float>(), ctx.Output("GoodStepsOut")->data<int64_t>(),
      NativeStream(ctx));
  return LastLaunchStatus("update_loss_scale");
}

}  // namespace

void RegisterGradNormCudaKernels() {
  auto& r = KernelRegistry::Cuda();
  r.Register("squared_l2_norm", SquaredL2NormKernel);
  r.Register("grad_scale", GradScaleKernel);
  r.Register("update_loss_scale", UpdateLossScaleKernel);
}

}  // namespace loom
