// A plan's ops timed for the cost table: inside its ranks' steps where it
// can (step_profiler.h), then whatever no step ran, one op at a time
// (op_profiler.h). `loom profile` times a layout this way, and `loom tune
// --profile_ops` each candidate it picks to fill its table
// (tune_profile_picks.h).
#ifndef LOOM_PROFILING_PLAN_OP_PROFILE_H_
#define LOOM_PROFILING_PLAN_OP_PROFILE_H_

#include <functional>
#include <optional>
#include <vector>

#include "models/gpt.h"
#include "profiling/op_profiler.h"
#include "profiling/step_profiler.h"
#include "scheduler/plan.h"

namespace loom {

struct PlanOpProfileOptions {
  // Time ops inside steps; off, or with options.alone.device set (steps
  // are timed on the CPU only, so far): every op alone.
  bool in_step = true;
  StepProfileOptions step;
  OpProfileOptions alone;
  StepProgressFn step_progress;
  ProfileProgressFn alone_progress;
};

struct PlanOpProfile {
  std::optional<InStepProfile> in_step;  // absent when no step was timed
  BlockProfile alone;                    // what no step timed; pure communication skipped
};

// Every job program of `plan`'s ranks, ranks that share programs once.
std::vector<const Block*> PlanBlocks(const Plan& plan);

// Times every distinct op signature `plan` (every rank of `config`'s
// model) runs.
StatusOr<PlanOpProfile> ProfilePlanOps(const GptConfig& config, const Plan& plan,
                                       const PlanOpProfileOptions& options);

// Each of `plans` (every rank of `config`'s model) as ProfilePlanOps
// times it, `rounds` times over the list, each round's steps
// options.step.steps / rounds (at least one); a signature's timing is the
// median round's. A host whose speed drifts over minutes then slows one
// round of each plan rather than every sample of one plan, which had
// priced a gpt-small layout 25% over its own profile
// (docs/tuner_accuracy.md). `progress` is told each plan's round as it
// starts.
StatusOr<std::vector<PlanOpProfile>> ProfilePlansInRounds(
    const GptConfig& config, const std::vector<const Plan*>& plans, int rounds,
    const PlanOpProfileOptions& options,
    const std::function<void(int round, size_t plan)>& progress = nullptr);

}  // namespace loom

#endif  // LOOM_PROFILING_PLAN_OP_PROFILE_H_
