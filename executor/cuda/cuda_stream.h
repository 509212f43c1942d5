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

#include "executor/stream.h"

namespace loom {

class CudaEvent : public Event {
 public:
  static StatusOr<std::unique_ptr<CudaEvent>> Create(int device);
  ~CudaEvent() override;
  cudaEvent_t native() const { return event_; }

 private:
  explicit CudaEvent(cudaEvent_t event) : event_(event) {}
  cudaEvent_t event_;
};

class CudaStream : public Stream {
 public:
  static StatusOr<std::unique_ptr<CudaStream>> Create(int device, const StreamOptions& options);
  ~CudaStream() override;

  const StreamOptions& options() const override { return options_; }
  // The runtime's current device is per host thread.
  void OnIssuingThread() override;
  Status Record(Event* event, int64_t generation) override;
  StatusOr<bool> Wait(Event* event, int64_t generation,
                      const std::atomic<bool>& abort) override;
  Status Synchronize() override;
  void* native_handle() const override { return stream_; }

  cudaStream_t native() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  int device() const { return device_; }
  // The CUDA priority it was created with (lower is more urgent).
  int cuda_priority() const { return cuda_priority_; }

 private:
  CudaStream(int device, StreamOptions options) : device_(device), options_(std::move(options)) {}
  int device_;
  StreamOptions options_;
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
