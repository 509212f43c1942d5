// The strategies `loom tune` considers for a GPT model on N devices, and
// what can be said of each without planning it: whether it is well
// formed, and lower bounds on its step time and on its fullest rank's
// memory. The search (runtime/tuner.h) simulates what these let through.
#ifndef LOOM_RUNTIME_TUNE_SPACE_H_
#define LOOM_RUNTIME_TUNE_SPACE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cost_model/cost_context.h"
#include "framework/optimizer.h"
#include "models/gpt.h"
#include "passes/strategy.h"

namespace loom {

// Which knobs the search turns. A knob it does not turn keeps the base
// strategy's value; AMP and everything else outside these is always kept.
struct TuneSpace {
  int devices = 0;
  // Schedules to try where pp > 1 (empty: every one); with pp = 1 only
  // 1F1B, and 1F1B-overlap under tensor parallelism, differ.
  std::vector<std::string> schedules;
  int max_vpp = 3;  // VPP's chunks a stage: 2..max_vpp
  bool sharding = true;           // ZeRO stages 0-3 where dp > 1
  bool recompute = true;          // none, selective, full
  bool sequence_parallel = true;  // off and on where mp > 1
  bool op_split = true;           // off and on where mp > 1
  // After the search, the winner's recomputed layers, bucket size and ZeRO
  // fetching, one at a time (runtime/tune_refine.h); not after a search
  // stopped at its time limit.
  bool refine = true;
};

struct TuneCandidate {
  proto::Strategy strategy;
  std::string name;  // "dp2 mp2 pp1 m4 1F1B zero1 rc=none sp op-split"
  // No plan of it steps faster: its share of the serial program's ops as
  // the cost model prices them, with its layers' tensor-parallel calls
  // where they outlast that compute, the pipeline's fill before the last
  // stage can start, and the calls its data-parallel stream must carry
  // (TimeBoundsOf in tune_bounds.cc).
  double time_bound_s = 0;
  // Its fullest rank holds at least this: parameters, gradients, master
  // weights and optimizer state of an average rank, at their smallest
  // dtypes, divided as its ZeRO stage divides them, and what its stages
  // keep for their backward with as many micro-batches in flight as its
  // schedule lets them, each holding its stage's layers as
  // pipeline-split cuts them (runtime/tune_memory_bound.h).
  int64_t memory_bound_bytes = 0;
};

struct TuneSpaceResult {
  // Well formed and, by their bounds, under the memory limit, in
  // enumeration order.
  std::vector<TuneCandidate> candidates;
  int considered = 0;
  // Candidates dropped, by the rule that dropped them (for the report).
  std::map<std::string, int> pruned;
};

// Every strategy of `space` for `config` on `space.devices` devices, over
// `base`, with bounds priced on `ops` for `cluster`. `memory_limit_bytes` (0: none)
// drops those whose memory bound exceeds it. An error only for a space
// that cannot be searched (no devices, an unknown schedule, a model the
// cost model cannot price).
StatusOr<TuneSpaceResult> EnumerateTuneSpace(const GptConfig& config,
                                             const OptimizerConfig& optimizer,
                                             const proto::Strategy& base, const CostContext& costs,
                                             const TuneSpace& space, int64_t memory_limit_bytes);

// The order the search takes `candidates` in: cheapest time bound first,
// ties in the space's order (less recomputation first). Indices.
std::vector<size_t> CheapestBoundFirst(const std::vector<TuneCandidate>& candidates);

// The candidate's name for a strategy (TuneCandidate::name).
std::string TuneCandidateName(const proto::Strategy& strategy);

}  // namespace loom

#endif  // LOOM_RUNTIME_TUNE_SPACE_H_
