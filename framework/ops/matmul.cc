// Placeholder: filled in with the matmul ops.
#include "framework/ops/op_helpers.h"

namespace loom {

void RegisterMatmulOps() {}

}  // namespace loom
