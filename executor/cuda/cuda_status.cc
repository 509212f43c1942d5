#include "executor/cuda/cuda_status.h"

namespace loom {

Status CudaStatus(cudaError_t error, const std::string& what) {
  if (error == cudaSuccess) return Status::OK();
  const std::string text = StrCat(what, ": ", cudaGetErrorString(error));
  switch (error) {
    case cudaErrorMemoryAllocation:
      return ResourceExhausted(text);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
      return Status(StatusCode::kUnavailable, text);
    default:
      return Internal(text);
  }
}

Status CublasStatus(cublasStatus_t status, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::OK();
  const std::string text = StrCat(what, ": ", cublasGetStatusString(status));
  return status == CUBLAS_STATUS_ALLOC_FAILED ? ResourceExhausted(text) : Internal(text);
}

Status LastLaunchStatus(const std::string& kernel) {
  return CudaStatus(cudaGetLastError(), StrCat(kernel, " kernel launch"));
}

}  // namespace loom
