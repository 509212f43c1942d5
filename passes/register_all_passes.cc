// The one list of passes.
#include <mutex>

#include "framework/op_registry.h"
#include "passes/parallel_passes.h"
#include "passes/pass_registry.h"

namespace loom {

void RegisterAllPasses() {
  static std::once_flag once;
  std::call_once(once, [] {
    RegisterAllOps();
    LOOM_REGISTER_PASS(TensorParallelPassInfo);
    LOOM_REGISTER_PASS(SequenceParallelPassInfo);
    LOOM_REGISTER_PASS(PipelineSplitPassInfo);
    LOOM_REGISTER_PASS(GradientAccumulationPassInfo);
    LOOM_REGISTER_PASS(RecomputePassInfo);
    LOOM_REGISTER_PASS(DataParallelPassInfo);
    LOOM_REGISTER_PASS(ShardingPassInfo);
    LOOM_REGISTER_PASS(LowPrecisionWeightsPassInfo);
    LOOM_REGISTER_PASS(OpSplitPassInfo);
    LOOM_REGISTER_PASS(GradClipPassInfo);
    LOOM_REGISTER_PASS(SplitBackwardPassInfo);
    LOOM_REGISTER_PASS(JobSplitPassInfo);
    LOOM_REGISTER_PASS(SchedulePassInfo);
  });
}

}  // namespace loom
