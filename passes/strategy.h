// Loading, overriding and checking a Strategy.
#ifndef LOOM_PASSES_STRATEGY_H_
#define LOOM_PASSES_STRATEGY_H_

#include <string>

#include "framework/status.h"
#include "passes/amp.h"
#include "passes/strategy.pb.h"
#include "scheduler/layout.h"
#include "scheduler/schedule.h"

namespace loom {

// Parses a text-format Strategy; errors name the file, line and field.
StatusOr<proto::Strategy> LoadStrategy(const std::string& path);
StatusOr<proto::Strategy> ParseStrategy(const std::string& text);

ParallelLayout LayoutOf(const proto::Strategy& strategy);

// Checks what can be checked without the model: degrees are positive, their
// product is `world_size` (when world_size > 0), the schedule exists, the
// pipeline switch agrees with its degree, micro-batches fit the schedule.
// Model-dependent checks (heads divisible by mp, layers by stages x chunks,
// batch by dp x micro-batches) run in the passes that need them. Every
// message names the field at fault, as "pipeline.micro_batches".
// The most ranks (and jobs a stage) a strategy may ask for.
inline constexpr int64_t kMaxWorldSize = int64_t{1} << 20;

Status ValidateStrategy(const proto::Strategy& strategy, int world_size = 0);

// A strategy ValidateStrategy accepted, with what checking it found: its
// schedule, its rank grid and its mixed precision. Planning takes this, so
// that however many ranks it plans, the strategy is checked and its
// schedule looked up once.
struct CheckedStrategy {
  proto::Strategy strategy;
  const ScheduleInfo* schedule = nullptr;
  ParallelLayout layout;
  AmpConfig amp;
};
StatusOr<CheckedStrategy> CheckStrategy(const proto::Strategy& strategy, int world_size = 0);

// A strategy with the given degrees and pipeline schedule (the pipeline is
// enabled when pp > 1); everything else at its defaults.
proto::Strategy MakeStrategy(int dp, int mp, int pp, int micro_batches,
                             const std::string& schedule, int vpp_degree = 1);

}  // namespace loom

#endif  // LOOM_PASSES_STRATEGY_H_
