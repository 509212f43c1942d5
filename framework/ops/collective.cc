// Placeholder: filled in with the collective ops.
#include "framework/ops/op_helpers.h"

namespace loom {

void RegisterCollectiveOps() {}

}  // namespace loom
