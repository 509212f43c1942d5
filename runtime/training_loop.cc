#include "runtime/training_loop.h"

#include <cmath>

#include <chrono>
#include <optional>

#include "framework/file_util.h"

namespace loom {
namespace {

Status CheckOptions(const Trainer& trainer, const TrainingLoopOptions& o) {
  if (o.steps <= 0) return InvalidArgument("--steps must be positive, got ", o.steps);
  if (o.save_every < 0) return InvalidArgument("--save_every must be >= 0, got ", o.save_every);
  if (o.keep < 1) return InvalidArgument("--keep_checkpoints must be >= 1, got ", o.keep);
  if (!trainer.HoldsWholeState()) {
    // Skipping restores every rank from the state before the step, which
    // does not reach across the processes of a launch yet.
    if (o.skip_nonfinite) {
      return Unimplemented(
          "--skip_nonfinite_steps needs every rank in one process (not under loom launch)");
    }
  }
  return Status::OK();
}

}  // namespace

Status RunTrainingLoop(Trainer& trainer, const TrainingLoopOptions& options,
                       const std::function<void(const StepReport&)>& on_step,
                       const std::function<void(const std::string&)>& on_note) {
  LOOM_RETURN_IF_ERROR(CheckOptions(trainer, options));
  // Checked before any step, so that a bad directory fails now.
  if (!options.save_dir.empty()) {
    LOOM_RETURN_IF_ERROR(
        CheckWritable(StrCat(options.save_dir, "/", "step")).WithContext("--save_dir"));
  }
  const std::map<std::string, std::string> model = trainer.ModelRecord();
  int64_t first = 0;
  std::string resume = options.resume;
  if (resume.empty() && options.resume_from_save_dir && HoldsCheckpoint(options.save_dir)) {
    resume = options.save_dir;
  }
  if (!resume.empty()) {
    StatusOr<Checkpoint> checkpoint = LoadCheckpoint(resume);
    if (!checkpoint.ok()) return checkpoint.status().WithContext("--resume");
    LOOM_RETURN_IF_ERROR(CheckResumable(*checkpoint, model).WithContext("--resume"));
    LOOM_RETURN_IF_ERROR(trainer.SetState(checkpoint->state, checkpoint->path));
    first = checkpoint->info.step;
    on_note(StrCat("resumed from ", checkpoint->path, " at step ", first, " (saved by ",
                   checkpoint->info.layout, ")"));
    if (first >= options.steps) {
      on_note(StrCat("nothing to train: the checkpoint is at step ", first, " and --steps is ",
                     options.steps));
    }
  }
  auto save = [&](int64_t steps_done) -> Status {
    LOOM_ASSIGN_OR_RETURN(std::optional<TrainingState> state,
                          trainer.StateForCheckpoint(steps_done));
    if (!state.has_value()) return Status::OK();  // another process writes it
    CheckpointInfo info;
    info.step = steps_done;
    info.model = model;
    info.data = trainer.data().Describe();
    info.layout = trainer.Layout();
    LOOM_ASSIGN_OR_RETURN(std::string dir,
                          SaveCheckpoint(options.save_dir, info, *state, options.keep));
    on_note(StrCat("saved ", dir));
    return Status::OK();
  };
  for (int64_t step = first; step < options.steps; ++step) {
    std::optional<TrainingState> before;
    if (options.skip_nonfinite) {
      LOOM_ASSIGN_OR_RETURN(before, trainer.State());
    }
    const float scale_before = trainer.LossScale();
    const auto start = std::chrono::steady_clock::now();
    StatusOr<float> loss = trainer.Step(step);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count();
    if (!loss.ok() && loss.status().code() == StatusCode::kAborted && before.has_value()) {
      LOOM_RETURN_IF_ERROR(trainer.SetState(*before, StrCat("the state before step ", step)));
      on_note(StrCat("step ", step, " skipped: its loss is not finite; the state from before it "
                     "is restored"));
    } else {
      LOOM_RETURN_IF_ERROR(loss.status());
      const float grad_norm = trainer.LastGradNorm();
      on_step(StepReport{step, *loss, ms, trainer.LastLearningRate(), grad_norm});
      // fp16 loss scaling skipped the update (every rank did: they agree
      // on the norm) and halved the scale.
      if (!std::isnan(scale_before) && !std::isfinite(grad_norm)) {
        on_note(StrCat("step ", step, " skipped: non-finite gradients, loss scale ",
                       scale_before, " -> ", trainer.LossScale()));
      }
    }
    // A skipped step still counts: the run's last checkpoint is its end.
    const int64_t done = step + 1;
    if (!options.save_dir.empty() &&
        (done == options.steps || (options.save_every > 0 && done % options.save_every == 0))) {
      LOOM_RETURN_IF_ERROR(save(done));
    }
  }
  return Status::OK();
}

}  // namespace loom
