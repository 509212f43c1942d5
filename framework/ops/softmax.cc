// Placeholder: filled in with the softmax ops.
#include "framework/ops/op_helpers.h"

namespace loom {

void RegisterSoftmaxOps() {}

}  // namespace loom
