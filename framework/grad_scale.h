// grad_scale's formula (framework/ops/grad_norm.cc), one implementation
// for the CPU and CUDA kernels.
#ifndef LOOM_FRAMEWORK_GRAD_SCALE_H_
#define LOOM_FRAMEWORK_GRAD_SCALE_H_

#include <cmath>
#include <cstdint>

#include "framework/host_device.h"

namespace loom {

struct GradScaleResult {
  float scale;  // what updates multiply gradients by; NaN: skip the step
  float norm;   // the global norm of the true (unscaled) gradients
};

// `squared`: the sum of the squares of the gradients, which carry
// `loss_scale`; `max_norm` 0: no clipping. The coefficient is
// torch.nn.utils.clip_grad_norm_'s, max_norm / (norm + 1e-6), clamped at 1.
LOOM_HOST_DEVICE inline GradScaleResult GradScaleOf(float squared, float loss_scale,
                                                    float max_norm) {
  const float norm = std::sqrt(squared) / loss_scale;
  if (!std::isfinite(squared)) return GradScaleResult{std::nanf(""), norm};
  float clip = 1.0f;
  if (max_norm > 0) clip = std::fmin(1.0f, max_norm / (norm + 1e-6f));
  return GradScaleResult{clip / loss_scale, norm};
}

// Dynamic loss scaling, as PyTorch's GradScaler: a step whose gradients
// overflowed (`squared` not finite) halves the scale and restarts the count
// of good steps; `growth_interval` good steps in a row double it (while
// doubling keeps it finite).
LOOM_HOST_DEVICE inline void UpdateLossScale(float squared, int64_t growth_interval,
                                             float* scale, int64_t* good_steps) {
  if (!std::isfinite(squared)) {
    *scale *= 0.5f;
    *good_steps = 0;
    return;
  }
  if (++*good_steps < growth_interval) return;
  *good_steps = 0;
  if (std::isfinite(*scale * 2.0f)) *scale *= 2.0f;
}

}  // namespace loom

#endif  // LOOM_FRAMEWORK_GRAD_SCALE_H_
