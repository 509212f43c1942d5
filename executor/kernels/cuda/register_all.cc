// The one place that lists every group of CUDA kernels, mirroring
// kernels/cpu/register_all.cc: every op with a CPU kernel has one here
// (unittests/cuda_kernels_test.cc checks).
#include <mutex>

#include "executor/kernel.h"

namespace loom {

void RegisterActivationCudaKernels();
void RegisterCastCudaKernels();
void RegisterCollectiveCudaKernels();
void RegisterDropoutCudaKernels();
void RegisterElementwiseCudaKernels();
void RegisterEmbeddingCudaKernels();
void RegisterFillCudaKernels();
void RegisterGradNormCudaKernels();
void RegisterLayerNormCudaKernels();
void RegisterLrScheduleCudaKernels();
void RegisterMatmulCudaKernels();
void RegisterOptimizerCudaKernels();
void RegisterReduceCudaKernels();
void RegisterShapeCudaKernels();
void RegisterSoftmaxCudaKernels();

void RegisterAllCudaKernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    RegisterAllOps();
    RegisterActivationCudaKernels();
    RegisterCastCudaKernels();
    RegisterCollectiveCudaKernels();
    RegisterDropoutCudaKernels();
    RegisterElementwiseCudaKernels();
    RegisterEmbeddingCudaKernels();
    RegisterFillCudaKernels();
    RegisterGradNormCudaKernels();
    RegisterLayerNormCudaKernels();
    RegisterLrScheduleCudaKernels();
    RegisterMatmulCudaKernels();
    RegisterOptimizerCudaKernels();
    RegisterReduceCudaKernels();
    RegisterShapeCudaKernels();
    RegisterSoftmaxCudaKernels();
  });
}

}  // namespace loom
