// Placeholder: filled in with the dropout ops.
#include "framework/ops/op_helpers.h"

namespace loom {

void RegisterDropoutOps() {}

}  // namespace loom
