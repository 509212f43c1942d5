#include "executor/device.h"

#ifdef LOOM_WITH_CUDA
#include "executor/cuda/cuda_device.h"
#endif

namespace loom {

StatusOr<std::unique_ptr<Device>> CreateCudaDevice(int ordinal) {
#ifdef LOOM_WITH_CUDA
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> device, CudaDevice::Create(ordinal));
  return std::unique_ptr<Device>(std::move(device));
#else
  (void)ordinal;
  return Unimplemented("--device cuda: this build has no CUDA backend (LOOM_CUDA=OFF, or "
                       "configure found no CUDA toolkit with NCCL)");
#endif
}

}  // namespace loom
