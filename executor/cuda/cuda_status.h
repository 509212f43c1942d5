// CUDA, cuBLAS and NCCL results as Statuses that say what failed and why.
// Host code only (the backend's .cc files); kernels' launchers report
// through cudaGetLastError, which the caller turns into a Status here.
#ifndef LOOM_EXECUTOR_CUDA_CUDA_STATUS_H_
#define LOOM_EXECUTOR_CUDA_CUDA_STATUS_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "framework/status.h"

namespace loom {

// OK for cudaSuccess; otherwise "<what>: <CUDA's text>", ResourceExhausted
// for cudaErrorMemoryAllocation, Unavailable where there is no usable
// device, Internal for the rest.
Status CudaStatus(cudaError_t error, const std::string& what);
Status CublasStatus(cublasStatus_t status, const std::string& what);
// The error a kernel launch left, if any (cudaGetLastError).
Status LastLaunchStatus(const std::string& kernel);

}  // namespace loom

#define LOOM_CUDA_RETURN_IF_ERROR(call, what) \
  LOOM_RETURN_IF_ERROR(::loom::CudaStatus((call), (what)))

#endif  // LOOM_EXECUTOR_CUDA_CUDA_STATUS_H_
