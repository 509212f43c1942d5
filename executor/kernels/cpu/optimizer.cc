// Placeholder: filled in with the optimizer CPU kernels.
#include "executor/kernels/cpu/cpu_helpers.h"

namespace loom {

void RegisterOptimizerCpuKernels() {}

}  // namespace loom
