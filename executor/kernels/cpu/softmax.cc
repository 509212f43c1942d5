// Placeholder: filled in with the softmax CPU kernels.
#include "executor/kernels/cpu/cpu_helpers.h"

namespace loom {

void RegisterSoftmaxCpuKernels() {}

}  // namespace loom
