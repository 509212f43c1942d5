// Placeholder: filled in with the collective CPU kernels.
#include "executor/kernels/cpu/cpu_helpers.h"

namespace loom {

void RegisterCollectiveCpuKernels() {}

}  // namespace loom
