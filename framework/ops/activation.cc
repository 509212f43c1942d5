// Placeholder: filled in with the activation ops.
#include "framework/ops/op_helpers.h"

namespace loom {

void RegisterActivationOps() {}

}  // namespace loom
