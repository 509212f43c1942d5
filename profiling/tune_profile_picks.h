// Which of a tune's candidates to profile so that the cost table holds
// every op any of them runs (`loom tune --profile_ops`). An op is timed
// among the ops it runs beside, so for each signature the table lacks the
// pick is the plainest candidate that runs it: no recomputation before
// recomputation, a lower ZeRO stage before a higher one, then the space's
// order. A ZeRO-3 plan's matmuls wait behind its gathers, and a table
// filled from one priced the plain plans of its shape well over what they
// measured (docs/tuner_accuracy.md); so a pick's profile adds to the table
// only the signatures it was picked for.
#ifndef LOOM_PROFILING_TUNE_PROFILE_PICKS_H_
#define LOOM_PROFILING_TUNE_PROFILE_PICKS_H_

#include <string>
#include <vector>

#include "cost_model/cost_table.h"
#include "models/gpt.h"
#include "passes/planner.h"
#include "profiling/op_profiler.h"
#include "runtime/tune_space.h"
#include "scheduler/plan.h"

namespace loom {

struct ProfilePick {
  size_t candidate = 0;  // index into the candidates
  // The signatures the table lacks that this is the plainest candidate to
  // run, in the order its programs first run them.
  std::vector<std::string> signatures;
  Plan plan;  // the candidate's, every rank, to be timed
};

// The picks over `candidates` (of `config` under `optimizer`), plainest
// first, for the table's rows on `device`. Ops the table need not price
// (views with no work, pure communication, what `timing` cannot time
// here: UnprofilableReason) are not counted. Each candidate is planned as
// `plan_options` plans it; one that fails to plan is passed over (the
// search reports it).
StatusOr<std::vector<ProfilePick>> PicksToProfile(const GptConfig& config,
                                                  const OptimizerConfig& optimizer,
                                                  const std::vector<TuneCandidate>& candidates,
                                                  const CostTable& table, const std::string& device,
                                                  const OpProfileOptions& timing,
                                                  const PlanOptions& plan_options);

}  // namespace loom

#endif  // LOOM_PROFILING_TUNE_PROFILE_PICKS_H_
