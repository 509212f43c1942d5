#include "executor/cuda/cuda_stream.h"

#include <cmath>

#include "executor/cuda/cuda_status.h"

namespace loom {

namespace {

cudaEvent_t NativeOf(EventArray& events, int i) {
  return static_cast<CudaEventArray&>(events).native(i);
}

}  // namespace

StatusOr<std::unique_ptr<CudaEventArray>> CudaEventArray::Create(int device, int n,
                                                                 WaitRoom* room) {
  LOOM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device), StrCat("cudaSetDevice(", device, ")"));
  std::unique_ptr<CudaEventArray> events(new CudaEventArray(n, room));
  events->natives_.reserve(n);
  for (int i = 0; i < n; ++i) {
    cudaEvent_t event = nullptr;
    LOOM_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                              StrCat("cuda:", device, ": cudaEventCreate (", i, " of ", n, ")"));
    events->natives_.push_back(event);
  }
  return events;
}

CudaEventArray::~CudaEventArray() {
  for (cudaEvent_t event : natives_) cudaEventDestroy(event);
}

int CudaPriorityFor(int priority, int lowest, int highest, int least, int greatest) {
  if (highest <= lowest || least == greatest) return least;
  const double share = static_cast<double>(priority - lowest) / (highest - lowest);
  return least + static_cast<int>(std::lround(share * (greatest - least)));
}

StatusOr<std::unique_ptr<CudaStream>> CudaStream::Create(int device,
                                                         const StreamOptions& options,
                                                         WaitRoom* room) {
  std::unique_ptr<CudaStream> s(new CudaStream(device, options, room));
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

Status CudaStream::RecordOnDevice(EventArray& events, int i) {
  return CudaStatus(cudaEventRecord(NativeOf(events, i), stream_),
                    StrCat("cuda:", device_, " stream ", options().name, ": cudaEventRecord"));
}

// Once the record is issued (the host part, Stream::Wait), the device
// waits by itself.
Status CudaStream::WaitOnDevice(EventArray& events, int i) {
  return CudaStatus(cudaStreamWaitEvent(stream_, NativeOf(events, i), 0),
                    StrCat("cuda:", device_, " stream ", options().name, ": cudaStreamWaitEvent"));
}

Status CudaStream::Synchronize() {
  return CudaStatus(cudaStreamSynchronize(stream_),
                    StrCat("cuda:", device_, " stream ", options().name));
}

}  // namespace loom
