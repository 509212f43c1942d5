// A plan's ops timed for the cost table: inside its ranks' steps where it
// can (step_profiler.h), then whatever no step ran, one op at a time
// (op_profiler.h). `loom profile` times a layout this way, and `loom tune
// --profile_ops` each candidate it picks to fill its table
// (tune_profile_picks.h).
#ifndef LOOM_PROFILING_PLAN_OP_PROFILE_H_
#define LOOM_PROFILING_PLAN_OP_PROFILE_H_

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
  BlockProfile alone;  // what no step timed; pure communication skipped
};

// Every job program of `plan`'s ranks, ranks that share programs once.
std::vector<const Block*> PlanBlocks(const Plan& plan);

// Times every distinct op signature `plan` (every rank of `config`'s
// model) runs.
StatusOr<PlanOpProfile> ProfilePlanOps(const GptConfig& config, const Plan& plan,
                                       const PlanOpProfileOptions& options);

}  // namespace loom

#endif  // LOOM_PROFILING_PLAN_OP_PROFILE_H_
