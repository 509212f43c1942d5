// Placeholder: filled in with the optimizer ops.
#include "framework/ops/op_helpers.h"

namespace loom {

void RegisterOptimizerOps() {}

}  // namespace loom
