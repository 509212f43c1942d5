// The CUDA backend's Device (the CPU backend's is cpu/cpu_device.h): one
// GPU, its streams and events (cuda_stream.h) and a stream-ordered caching
// allocator (cuda_allocator.h). Copies and fills are asynchronous on the
// stream given, but for CopyToHost, which returns once the host has the
// bytes.
#ifndef LOOM_EXECUTOR_CUDA_CUDA_DEVICE_H_
#define LOOM_EXECUTOR_CUDA_CUDA_DEVICE_H_

#include <memory>
#include <string>

#include "executor/cuda/cuda_allocator.h"
#include "executor/device.h"

namespace loom {

class CudaDevice : public Device {
 public:
  // Device `ordinal` of those this process sees (CUDA_VISIBLE_DEVICES);
  // Unavailable, saying why, where there is none.
  static StatusOr<std::unique_ptr<CudaDevice>> Create(int ordinal);

  DeviceType type() const override { return DeviceType::kCuda; }
  const std::string& name() const override { return name_; }
  int ordinal() const { return ordinal_; }

  StatusOr<std::unique_ptr<Stream>> CreateStream(const StreamOptions& options) override;
  StatusOr<std::unique_ptr<EventArray>> CreateEvents(int n) override;
  StatusOr<std::shared_ptr<void>> Allocate(int64_t bytes, Stream* stream) override;
  void MarkUsedOn(const std::shared_ptr<void>& memory, Stream* stream) override;
  Status Copy(void* dst, const void* src, int64_t bytes, Stream* stream) override;
  Status CopyFromHost(void* dst, const void* host_src, int64_t bytes, Stream* stream) override;
  Status CopyToHost(void* host_dst, const void* src, int64_t bytes, Stream* stream) override;
  Status Memset(void* dst, int byte, int64_t bytes, Stream* stream) override;

  CudaAllocator::Stats memory_stats() const { return allocator_.stats(); }

 private:
  explicit CudaDevice(int ordinal);
  Status MakeCurrent() const;
  const int ordinal_;
  const std::string name_;
  CudaAllocator allocator_;
  WaitRoom room_;  // its events'; outlives them
};

}  // namespace loom

#endif  // LOOM_EXECUTOR_CUDA_CUDA_DEVICE_H_
