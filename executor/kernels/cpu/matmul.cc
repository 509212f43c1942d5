// Placeholder: filled in with the matmul CPU kernels.
#include "executor/kernels/cpu/cpu_helpers.h"

namespace loom {

void RegisterMatmulCpuKernels() {}

}  // namespace loom
