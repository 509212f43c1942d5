// Placeholder: filled in with the activation CPU kernels.
#include "executor/kernels/cpu/cpu_helpers.h"

namespace loom {

void RegisterActivationCpuKernels() {}

}  // namespace loom
