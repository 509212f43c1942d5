// Placeholder: filled in with the dropout CPU kernels.
#include "executor/kernels/cpu/cpu_helpers.h"

namespace loom {

void RegisterDropoutCpuKernels() {}

}  // namespace loom
