// A diverged run stops: a non-finite loss is an error naming the step, in
// serial and parallel training alike, rather than a NaN printed (or, in a
// parallel run, taken for "this rank holds no loss") and trained past.
#ifndef LOOM_RUNTIME_FINITE_LOSS_H_
#define LOOM_RUNTIME_FINITE_LOSS_H_

#include <cmath>
#include <cstdint>

#include "framework/status.h"

namespace loom {

// kAborted, which a training loop that skips diverged steps recognizes.
inline Status CheckFiniteLoss(float loss, int64_t step) {
  if (std::isfinite(loss)) return Status::OK();
  return Aborted("step ", step, ": the loss is ", loss,
                            "; training diverged (a learning rate too high?) and stops here");
}

}  // namespace loom

#endif  // LOOM_RUNTIME_FINITE_LOSS_H_
