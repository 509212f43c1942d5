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

// The seconds `profile`'s timings add up to: each op timed in steps as
// often as a step runs it, each op timed alone once. Rounds of one plan
// compare by it.
double ProfiledSeconds(const PlanOpProfile& profile);

// What ProfilePlansInRounds took: each plan's fastest round, whole, and
// every round's ProfiledSeconds.
struct RoundsProfile {
  std::vector<PlanOpProfile> fastest;              // per plan, its fastest round
  std::vector<std::vector<double>> round_seconds;  // [plan][round]: ProfiledSeconds
};

// Each of `plans` (every rank of `config`'s model) as ProfilePlanOps
// times it, `rounds` times over the list, each round's steps
// options.step.steps / rounds (rounded up); each plan keeps its fastest
// round (ProfiledSeconds), whole. Another tenant of a shared host only
// ever slows a round, at times for minutes, long enough to slow most of a
// plan's rounds (docs/tuner_accuracy.md): the least slowed round is the
// nearest to the plan's own speed. A round is kept whole, not each op's
// fastest, so that no op's figure is picked from its luckiest moment.
// `progress` is told each plan's round as it starts; `plan_done` each as
// it ends, with every plan's fastest round so far (its error stops the
// rounds), so that a caller can keep what an interrupted run finished.
StatusOr<RoundsProfile> ProfilePlansInRounds(
    const GptConfig& config, const std::vector<const Plan*>& plans, int rounds,
    const PlanOpProfileOptions& options,
    const std::function<void(int round, size_t plan)>& progress = nullptr,
    const std::function<Status(int round, size_t plan, const RoundsProfile& so_far)>& plan_done =
        nullptr);

}  // namespace loom

#endif  // LOOM_PROFILING_PLAN_OP_PROFILE_H_
