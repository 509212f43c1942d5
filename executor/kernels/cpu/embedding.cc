// Placeholder: filled in with the embedding CPU kernels.
#include "executor/kernels/cpu/cpu_helpers.h"

namespace loom {

void RegisterEmbeddingCpuKernels() {}

}  // namespace loom
