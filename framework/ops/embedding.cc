// Placeholder: filled in with the embedding ops.
#include "framework/ops/op_helpers.h"

namespace loom {

void RegisterEmbeddingOps() {}

}  // namespace loom
