// The CUDA backend's streams and events (the CPU backend's are in
// cpu/cpu_stream.h). A CUDA stream is a cudaStream_t created at the
// priority its Loom priority maps to, with a cuBLAS handle bound to it
// (and a workspace of its own, for reproducible results); its host thread
// only enqueues. An event is a cudaEvent_t plus the host flag
// that says its record was issued: a waiting stream's host thread waits
// for the flag (so that cudaStreamWaitEvent sees this generation's record,
// not the last one), then the device waits by itself.
#ifndef LOOM_EXECUTOR_CUDA_CUDA_STREAM_H_
#define LOOM_EXECUTOR_CUDA_CUDA_STREAM_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "executor/stream.h"

namespace loom {

// Events whose natives are cudaEvent_t, made for ordering only (no
// timestamps, which makes record and wait cheaper).
class CudaEventArray : public EventArray {
 public:
  static StatusOr<std::unique_ptr<CudaEventArray>> Create(int device, int n, WaitRoom* room);
  ~CudaEventArray() override;
  cudaEvent_t native(int i) const { return natives_[i]; }

 private:
  using EventArray::EventArray;
  std::vector<cudaEvent_t> natives_;
};

class CudaStream : public Stream {
 public:
  // `room`: the device's, where its events' waiters sleep.
  static StatusOr<std::unique_ptr<CudaStream>> Create(int device, const StreamOptions& options,
                                                      WaitRoom* room);
  ~CudaStream() override;

  // The runtime's current device is per host thread.
  void OnIssuingThread() override;
  Status Synchronize() override;
  void* native_handle() const override { return stream_; }

  cudaStream_t native() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  int device() const { return device_; }
  // The CUDA priority it was created with (lower is more urgent).
  int cuda_priority() const { return cuda_priority_; }

 private:
  CudaStream(int device, StreamOptions options, WaitRoom* room)
      : Stream(std::move(options), room, /*on_device=*/true, /*yield=*/true), device_(device) {}
  Status RecordOnDevice(EventArray& events, int i) override;
  Status WaitOnDevice(EventArray& events, int i) override;
  int device_;
  int cuda_priority_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* workspace_ = nullptr;  // the cuBLAS handle's
};

// Maps Loom's `priority` within [lowest, highest] onto CUDA's range
// [least, greatest] (CUDA's numbers fall as urgency rises: least is 0,
// greatest e.g. -5), linearly, the highest onto greatest. A rank whose
// streams share one priority gets `least` everywhere.
int CudaPriorityFor(int priority, int lowest, int highest, int least, int greatest);

}  // namespace loom

#endif  // LOOM_EXECUTOR_CUDA_CUDA_STREAM_H_
