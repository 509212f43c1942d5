// Registry entries of the parallelization passes, one per file.
#ifndef LOOM_PASSES_PARALLEL_PASSES_H_
#define LOOM_PASSES_PARALLEL_PASSES_H_

#include "passes/pass.h"

namespace loom {

PassInfo TensorParallelPassInfo();
PassInfo PipelineSplitPassInfo();
PassInfo GradientAccumulationPassInfo();
PassInfo DataParallelPassInfo();
PassInfo OpSplitPassInfo();
PassInfo ShardingPassInfo();
PassInfo SplitBackwardPassInfo();
PassInfo JobSplitPassInfo();
PassInfo SchedulePassInfo();

// Divides dim 0 of every data var by `parts` and re-infers shapes; the
// error names `field` (the strategy field that asked for it) and the var.
Status ShardBatchDim(Block& block, int64_t parts, const char* field);

}  // namespace loom

#endif  // LOOM_PASSES_PARALLEL_PASSES_H_
