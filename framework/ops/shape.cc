// Placeholder: filled in with the shape ops.
#include "framework/ops/op_helpers.h"

namespace loom {

void RegisterShapeOps() {}

}  // namespace loom
