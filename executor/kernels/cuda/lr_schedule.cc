// CUDA kernel for lr_schedule (host side). The counter stays on the device:
// reading it on the host would wait for the stream every step.
#include "executor/kernels/cuda/cuda_kernel_helpers.h"

namespace loom {
namespace {

Status LrScheduleKernel(const KernelContext& ctx) {
  LOOM_ASSIGN_OR_RETURN(LrScheduleParams params, LrScheduleParamsOf(ctx.desc()));
  cuda::LaunchLrSchedule(params, ctx.Input("Step").data<int64_t>(),
                         ctx.Output("LearningRate")->data<float>(),
                         ctx.Output("StepOut")->data<int64_t>(), NativeStream(ctx));
  return LastLaunchStatus("lr_schedule");
}

}  // namespace

void RegisterLrScheduleCudaKernels() {
  KernelRegistry::Cuda().Register("lr_schedule", LrScheduleKernel);
}

}  // namespace loom
