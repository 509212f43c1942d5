// The one place that lists every group of CPU kernels.
#include <mutex>

#include "executor/kernel.h"

namespace loom {

void RegisterActivationCpuKernels();
void RegisterCastCpuKernels();
void RegisterCollectiveCpuKernels();
void RegisterDropoutCpuKernels();
void RegisterElementwiseCpuKernels();
void RegisterEmbeddingCpuKernels();
void RegisterFillCpuKernels();
void RegisterGradNormCpuKernels();
void RegisterLayerNormCpuKernels();
void RegisterLrScheduleCpuKernels();
void RegisterMatmulCpuKernels();
void RegisterOptimizerCpuKernels();
void RegisterReduceCpuKernels();
void RegisterShapeCpuKernels();
void RegisterSoftmaxCpuKernels();

void RegisterAllCpuKernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    RegisterAllOps();
    RegisterActivationCpuKernels();
    RegisterCastCpuKernels();
    RegisterCollectiveCpuKernels();
    RegisterDropoutCpuKernels();
    RegisterElementwiseCpuKernels();
    RegisterEmbeddingCpuKernels();
    RegisterFillCpuKernels();
    RegisterGradNormCpuKernels();
    RegisterLayerNormCpuKernels();
    RegisterLrScheduleCpuKernels();
    RegisterMatmulCpuKernels();
    RegisterOptimizerCpuKernels();
    RegisterReduceCpuKernels();
    RegisterShapeCpuKernels();
    RegisterSoftmaxCpuKernels();
  });
}

}  // namespace loom
