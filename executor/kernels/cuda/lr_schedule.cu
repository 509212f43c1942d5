// CUDA kernel for lr_schedule: one thread, the step counter and the rate
// both on the device, with the CPU's formula (framework/lr_schedule.h).
#include "executor/kernels/cuda/launchers.h"

namespace loom {
namespace cuda {
namespace {

__global__ void LrScheduleKernel(LrScheduleParams params, const int64_t* step, float* lr,
                                 int64_t* step_out) {
  const int64_t completed = *step;
  *lr = ScheduledLearningRate(params, completed);
  *step_out = completed + 1;
}

}  // namespace

void LaunchLrSchedule(const LrScheduleParams& params, const int64_t* step, float* lr,
                      int64_t* step_out, cudaStream_t s) {
  LrScheduleKernel<<<1, 1, 0, s>>>(params, step, lr, step_out);
}

}  // namespace cuda
}  // namespace loom
