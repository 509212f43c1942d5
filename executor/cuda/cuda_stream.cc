#include "executor/cuda/cuda_stream.h"

#include <cmath>

#include "executor/cuda/cuda_status.h"

namespace loom {

StatusOr<std::unique_ptr<CudaEvent>> CudaEvent::Create(int device) {
  LOOM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device), StrCat("cudaSetDevice(", device, ")"));
  cudaEvent_t event = nullptr;
  // Ordering only: no timestamps, which makes record and wait cheaper.
  LOOM_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                            "cudaEventCreate");
  return std::unique_ptr<CudaEvent>(new CudaEvent(event));
}

CudaEvent::~CudaEvent() { cudaEventDestroy(event_); }

int CudaPriorityFor(int priority, int lowest, int highest, int least, int greatest) {
  if (highest <= lowest || least == greatest) return least;
  const double share = static_cast<double>(priority - lowest) / (highest - lowest);
  return least + static_cast<int>(std::lround(share * (greatest - least)));
}

StatusOr<std::unique_ptr<CudaStream>> CudaStream::Create(int device,
                                                         const StreamOptions& options) {
  std::unique_ptr<CudaStream> s(new CudaStream(device, options));
  const std::string where = StrCat("cuda:", device, " stream ", options.name);
  LOOM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device), where);
  int least = 0, greatest = 0;
  LOOM_CUDA_RETURN_IF_ERROR(cudaDeviceGetStreamPriorityRange(&least, &greatest), where);
  s->cuda_priority_ =
      CudaPriorityFor(options.priority, options.lowest, options.highest, least, greatest);
  // Non-blocking: no implicit ordering against the legacy default stream,
  // which nothing of Loom's uses.
  LOOM_CUDA_RETURN_IF_ERROR(
      cudaStreamCreateWithPriority(&s->stream_, cudaStreamNonBlocking, s->cuda_priority_),
      StrCat(where, ": cudaStreamCreateWithPriority"));
  LOOM_RETURN_IF_ERROR(CublasStatus(cublasCreate(&s->cublas_), StrCat(where, ": cublasCreate")));
  LOOM_RETURN_IF_ERROR(
      CublasStatus(cublasSetStream(s->cublas_, s->stream_), StrCat(where, ": cublasSetStream")));
  // A workspace of the handle's own: with cuBLAS's shared pool, streams
  // running side by side may get different algorithms, and reruns
  // different bits. NVIDIA's sizes: 32 MiB on Hopper, 4 MiB before.
  cudaDeviceProp prop{};
  LOOM_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device), where);
  const size_t workspace = prop.major >= 9 ? (32u << 20) : (4u << 20);
  LOOM_CUDA_RETURN_IF_ERROR(cudaMalloc(&s->workspace_, workspace),
                            StrCat(where, ": cuBLAS workspace"));
  LOOM_RETURN_IF_ERROR(CublasStatus(cublasSetWorkspace(s->cublas_, s->workspace_, workspace),
                                    StrCat(where, ": cublasSetWorkspace")));
  return s;
}

CudaStream::~CudaStream() {
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void CudaStream::OnIssuingThread() { cudaSetDevice(device_); }

Status CudaStream::Record(Event* event, int64_t generation) {
  LOOM_CUDA_RETURN_IF_ERROR(
      cudaEventRecord(static_cast<CudaEvent*>(event)->native(), stream_),
      StrCat("cuda:", device_, " stream ", options_.name, ": cudaEventRecord"));
  event->issued().Raise(generation);
  return Status::OK();
}

StatusOr<bool> CudaStream::Wait(Event* event, int64_t generation,
                                const std::atomic<bool>& abort) {
  // Until the record is issued, a host wait; then the device's.
  if (!event->issued().Wait(generation, abort, /*yield=*/true)) return false;
  LOOM_CUDA_RETURN_IF_ERROR(
      cudaStreamWaitEvent(stream_, static_cast<CudaEvent*>(event)->native(), 0),
      StrCat("cuda:", device_, " stream ", options_.name, ": cudaStreamWaitEvent"));
  return true;
}

Status CudaStream::Synchronize() {
  return CudaStatus(cudaStreamSynchronize(stream_),
                    StrCat("cuda:", device_, " stream ", options_.name));
}

}  // namespace loom
