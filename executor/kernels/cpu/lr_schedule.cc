// CPU kernel for lr_schedule.
#include "executor/kernels/cpu/cpu_helpers.h"
#include "framework/lr_schedule.h"

namespace loom {
namespace {

Status LrScheduleKernel(const KernelContext& ctx) {
  LOOM_ASSIGN_OR_RETURN(LrScheduleParams params, LrScheduleParamsOf(ctx.desc()));
  const int64_t completed = ctx.Input("Step").data<int64_t>()[0];
  ctx.Output("LearningRate")->data<float>()[0] = ScheduledLearningRate(params, completed);
  ctx.Output("StepOut")->data<int64_t>()[0] = completed + 1;
  return Status::OK();
}

}  // namespace

void RegisterLrScheduleCpuKernels() {
  KernelRegistry::Cpu().Register("lr_schedule", LrScheduleKernel);
}

}  // namespace loom
