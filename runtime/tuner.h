// `loom tune`: the strategy for a GPT model on N devices that the
// simulator times fastest among those that fit the memory limit. The
// search enumerates the space (runtime/tune_space.h), drops what its
// bounds rule out, and simulates the rest on the cluster's cost model,
// cheapest bound first and in parallel threads, skipping a candidate once
// its time bound cannot beat the k-th best plan found, or once the same
// plan with less recomputation fits. Then it turns the winner's finer
// knobs one at a time (runtime/tune_refine.h).
#ifndef LOOM_RUNTIME_TUNER_H_
#define LOOM_RUNTIME_TUNER_H_

#include <array>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cost_model/cost_context.h"
#include "runtime/tune_refine.h"
#include "runtime/tune_space.h"
#include "runtime/tuned_plan.h"

namespace loom {

struct TuneProgress {
  int done = 0;        // simulated or skipped, of
  int candidates = 0;  // those the space let through
  int simulated = 0;
  double best_step_s = 0;  // 0: none fits yet
  std::string best;        // that plan's name
};

struct TuneOptions {
  TuneSpace space;
  // Everything the search does not turn (AMP, bucket sizes, ...).
  proto::Strategy base;
  int64_t memory_limit_bytes = 0;  // 0: none
  int top_k = 5;
  int threads = 2;
  // Simulate every candidate the space lets through: no bound or
  // dominance skips (to check that they never skip a winner).
  bool exhaustive = false;
  // Stop simulating once a round ends past this many seconds of search (0:
  // never), and report the best plans found by then. A stopped search
  // depends on the host's speed, so it is not repeatable.
  double time_limit_s = 0;
  std::function<void(const TuneProgress&)> progress;  // after each round
};

struct TuneReport {
  // The fastest that fit, best first, each with its equivalents folded in.
  std::vector<TunedPlan> top;
  std::vector<TunedPlan> simulated;  // every plan simulated, in search order
  int considered = 0;
  int candidates = 0;  // what the space let through
  int over_memory = 0;  // simulated, and over the memory limit
  // By rule, both the space's and the search's.
  std::map<std::string, int> pruned;
  // Candidates the planner or the simulator rejected, with its message.
  std::vector<std::pair<std::string, std::string>> failed;
  // Each candidate that reached the search, by name: what became of it
  // ("12.3 ms, fits", "skipped: ..."), for ExplainWinner.
  std::map<std::string, std::string> outcomes;
  // The search's best plan before the refinement (its name), and what the
  // refinement did with each knob (runtime/tune_refine.h); top.front() is
  // the refined winner.
  std::string search_best;
  std::vector<RefinedKnob> refined;
  // Plans the refinement tried and did not take; simulated, not in top.
  std::set<std::string> declined;
  // Candidates neither simulated nor skipped when the search stopped at
  // TuneOptions::time_limit_s (0: it ran to the end).
  int unsearched = 0;
  double seconds = 0;
};

// Searches `options.space` for `config`. Errors only for a space that
// cannot be searched; a candidate that fails to plan is reported, not
// fatal. The same inputs give the same report, whatever the threads,
// unless a time limit stops the search.
StatusOr<TuneReport> Tune(const GptConfig& config, const OptimizerConfig& optimizer,
                          const CostContext& costs, const TuneOptions& options);

// Why each knob of the winner: for the layout, the best plan of each other
// layout; for every other knob, the winner with only that knob changed and
// what became of it.
std::vector<std::string> ExplainWinner(const TuneReport& report, const TuneOptions& options);

}  // namespace loom

#endif  // LOOM_RUNTIME_TUNER_H_
