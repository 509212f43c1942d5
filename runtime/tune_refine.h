// The knobs `loom tune` turns on its best plan alone, after the search
// (runtime/tuner.h). Each trades memory, or calls, against time in a way
// only a simulation of the plan settles, and none decides which layout
// wins; so instead of multiplying the space by their values, they are
// turned one at a time on the winner (coordinate descent), in this order:
//   - recompute.num_layers: the fewest layers of each model chunk that,
//     recomputed at the winner's granularity, keep it within the memory
//     limit (more kept activations, less work);
//   - dp.bucket_size_bytes: the size the data-parallel pass chose, halved
//     or doubled while the step gets faster;
//   - sharding.fetch_mode "auto": each bucket's parameters made whole by
//     whichever of all-gather and all-reduce the comm model prices lower;
//   - under ZeRO stage 3, sharding.prefetch_depth 2 and 3, and
//     keep_gathered_bytes: the most buckets kept whole for the step that
//     fit.
// A value is taken only if its plan fits and steps at least 0.5% faster
// than the best so far. (The sharding degree has one value, the dp degree, and
// op-split's parts are the cost model's choice per GEMM.)
#ifndef LOOM_RUNTIME_TUNE_REFINE_H_
#define LOOM_RUNTIME_TUNE_REFINE_H_

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "models/gpt.h"
#include "runtime/tuned_plan.h"

namespace loom {

// What the refinement did with one knob, for --explain:
// "bucket size: 50.3 MB, 5781.000 ms (the plan's 25.2 MB: 5790.000 ms; ...)".
struct RefinedKnob {
  std::string knob;
  std::string outcome;
};

// Simulates candidates, as many at once as it has threads: a plan, or the
// planner's error, for each, in order.
using SimulateCandidates =
    std::function<std::vector<StatusOr<TunedPlan>>(const std::vector<TuneCandidate>&)>;

struct Refinement {
  std::vector<RefinedKnob> knobs;  // a line for each knob that applies
  // The plans tried and not taken (by candidate name): the winner's rivals
  // are the search's plans, not its own variants that were no better.
  std::set<std::string> declined;
};

// Turns the knobs above on `winner` (which fits) for `config`. `probes` is
// how many values a round of a search over one knob simulates at once (the
// threads). The plans it tried are those `simulate` was given, without
// time or memory bounds (0).
Refinement RefineWinner(const TunedPlan& winner, const GptConfig& config, int probes,
                        const SimulateCandidates& simulate);

}  // namespace loom

#endif  // LOOM_RUNTIME_TUNE_REFINE_H_
