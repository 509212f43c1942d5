// Registry entries of the parallelization passes, one per file.
#ifndef LOOM_PASSES_PARALLEL_PASSES_H_
#define LOOM_PASSES_PARALLEL_PASSES_H_

#include <string>
#include <utility>
#include <vector>

#include "passes/pass.h"
#include "passes/strategy.h"
#include "scheduler/schedule.h"

namespace loom {

PassInfo TensorParallelPassInfo();
PassInfo PipelineSplitPassInfo();
PassInfo GradientAccumulationPassInfo();
PassInfo RecomputePassInfo();
PassInfo SequenceParallelPassInfo();
PassInfo DataParallelPassInfo();
PassInfo OpSplitPassInfo();
PassInfo ShardingPassInfo();
PassInfo SplitBackwardPassInfo();
PassInfo JobSplitPassInfo();
PassInfo SchedulePassInfo();
PassInfo GradClipPassInfo();
PassInfo LowPrecisionWeightsPassInfo();

// The largest degree a pass option takes (the most ranks Loom plans).
inline constexpr int64_t kMaxPassDegree = kMaxWorldSize;

// The most parts op-split's cost search cuts an op into, unless its
// `max-parts` option says otherwise (the planner's pipeline does not).
inline constexpr int64_t kOpSplitMaxParts = 16;

// Every schedule by name, for options that name one (EnumOption).
std::vector<std::pair<std::string, const ScheduleInfo*>> ScheduleChoices();

// Divides dim 0 of every data var by `parts` and re-infers shapes; the
// error names `field` (the strategy field that asked for it) and the var.
Status ShardBatchDim(Block& block, int64_t parts, const char* field);

}  // namespace loom

#endif  // LOOM_PASSES_PARALLEL_PASSES_H_
