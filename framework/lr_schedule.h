// The learning rate of a step: linear warm-up, then constant, linear or
// cosine decay to a floor, as Megatron-LM schedules it. The lr_schedule op
// computes it in the program from a step counter the checkpoint holds, so
// a resumed run takes the same rates. nvcc compiles it for the CUDA kernel
// too (one implementation).
#ifndef LOOM_FRAMEWORK_LR_SCHEDULE_H_
#define LOOM_FRAMEWORK_LR_SCHEDULE_H_

#include <cmath>
#include <cstdint>

#include "framework/host_device.h"

namespace loom {

enum LrDecay : int { kLrConstant = 0, kLrLinear = 1, kLrCosine = 2 };

struct LrScheduleParams {
  float learning_rate = 0;      // the peak, reached at the end of warm-up
  float min_learning_rate = 0;  // the floor decay ends at
  int64_t warmup_steps = 0;
  // Steps from the start to the end of decay (warm-up included); after
  // them the rate stays at the floor.
  int64_t decay_steps = 0;
  int decay = kLrConstant;
};

// The rate of the step after `completed` steps. Warm-up rises linearly and
// reaches the peak on its last step, so the first step already trains (at
// peak / warmup_steps).
LOOM_HOST_DEVICE inline float ScheduledLearningRate(const LrScheduleParams& p,
                                                    int64_t completed) {
  const double n = static_cast<double>(completed) + 1;
  const double peak = p.learning_rate;
  if (p.warmup_steps > 0 && n <= p.warmup_steps) {
    return static_cast<float>(peak * n / static_cast<double>(p.warmup_steps));
  }
  if (p.decay == kLrConstant) return p.learning_rate;
  if (n > p.decay_steps) return p.min_learning_rate;
  const double span = static_cast<double>(p.decay_steps - p.warmup_steps);
  const double ratio = span > 0 ? (n - static_cast<double>(p.warmup_steps)) / span : 1.0;
  const double floor = p.min_learning_rate;
  const double coeff = p.decay == kLrLinear ? 1.0 - ratio : 0.5 * (std::cos(M_PI * ratio) + 1.0);
  return static_cast<float>(floor + coeff * (peak - floor));
}

}  // namespace loom

#ifndef __CUDACC__
#include <string>

#include "framework/framework.pb.h"
#include "framework/status.h"

namespace loom {

// "constant", "linear", "cosine" -> LrDecay; the error names the value.
StatusOr<LrDecay> ParseLrDecay(const std::string& name);
// The schedule an lr_schedule op's attributes describe, checked (the
// error names the attribute).
StatusOr<LrScheduleParams> LrScheduleParamsOf(const proto::OpDesc& op);

}  // namespace loom
#endif  // __CUDACC__

#endif  // LOOM_FRAMEWORK_LR_SCHEDULE_H_
