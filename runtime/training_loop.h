// The step loop every training command shares: resuming from a
// checkpoint, the steps, progress, saving checkpoints, and skipping steps
// whose loss is not finite.
#ifndef LOOM_RUNTIME_TRAINING_LOOP_H_
#define LOOM_RUNTIME_TRAINING_LOOP_H_

#include <cmath>
#include <functional>
#include <string>

#include "runtime/trainer.h"

namespace loom {

struct TrainingLoopOptions {
  // Steps of the whole run: a resumed run continues up to this step.
  int64_t steps = 0;
  // A checkpoint, or a save_dir whose newest complete one is taken.
  std::string resume;
  // Without `resume`: resume from save_dir's newest complete checkpoint if
  // it holds one, else start at step 0 (a run restarted by loom launch
  // --max_restarts).
  bool resume_from_save_dir = false;
  // Where checkpoints go (none if empty): every `save_every` steps (0:
  // only after the last step), keeping the newest `keep`.
  std::string save_dir;
  int64_t save_every = 0;
  int keep = 3;
  // A step whose loss is not finite is undone (the state from before it
  // restored) and training goes on, as mixed-precision trainers skip an
  // overflowing step; otherwise it stops training with an error naming
  // it. Costs a copy of the state every step.
  bool skip_nonfinite = false;
};

struct StepReport {
  int64_t step = 0;
  float loss = 0;  // NaN in a process that does not hold it
  double ms = 0;   // the step's wall time
  float learning_rate = NAN;  // the rate it used; NaN where not held here
  float grad_norm = NAN;      // its global gradient norm; NaN without clipping
};

// Runs `trainer` from step 0, or from the checkpoint of `options.resume`,
// to `options.steps`. Calls `on_step` after each step and `on_note` with a
// line for each resume, save and skipped step.
Status RunTrainingLoop(Trainer& trainer, const TrainingLoopOptions& options,
                       const std::function<void(const StepReport&)>& on_step,
                       const std::function<void(const std::string&)>& on_note);

}  // namespace loom

#endif  // LOOM_RUNTIME_TRAINING_LOOP_H_
