// One strategy `loom tune` simulated, and what the simulator said of it.
#ifndef LOOM_RUNTIME_TUNED_PLAN_H_
#define LOOM_RUNTIME_TUNED_PLAN_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/tune_space.h"
#include "scheduler/simulator.h"

namespace loom {

struct TunedPlan {
  TuneCandidate candidate;
  double step_time_s = 0;
  double bubble_fraction = 0;
  std::array<double, kNumCommCategories> exposed_comm_s{};
  int64_t peak_bytes = 0;
  int peak_rank = 0;
  // That rank's parameters as it keeps them (its shard, under ZeRO stage
  // 3), master weights included.
  int64_t peak_rank_parameter_bytes = 0;
  // The gradient bucket size the plan's data-parallel pass used (the
  // strategy's, or the cost model's when it left it 0; 1 without
  // bucketing).
  int64_t bucket_bytes = 0;
  bool fits = true;
  double tokens_per_s = 0;
  // Model FLOPs (GptConfig::TrainingFlopsPerStep) over the step, against
  // the devices' peak in the compute dtype.
  double mfu = 0;
  // Other candidates the simulator timed exactly alike (a knob that
  // changed nothing: op-split declining every op, say), folded into this
  // one in TuneReport::top.
  std::vector<std::string> equivalents;
};

}  // namespace loom

#endif  // LOOM_RUNTIME_TUNED_PLAN_H_
