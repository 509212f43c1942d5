// A device: memory its kernels read and write, copies and fills, and the
// streams and events that order its work (stream.h). The rank executor
// runs a lowered graph on one Device; the CPU backend (cpu/) and the CUDA
// backend (cuda/) implement it, with kernels registered per DeviceType
// (kernel.h).
#ifndef LOOM_EXECUTOR_DEVICE_H_
#define LOOM_EXECUTOR_DEVICE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "executor/stream.h"
#include "framework/status.h"

namespace loom {

class Device {
 public:
  virtual ~Device() = default;
  virtual DeviceType type() const = 0;
  // "cpu", "cuda:0": for messages.
  virtual const std::string& name() const = 0;

  virtual StatusOr<std::unique_ptr<Stream>> CreateStream(const StreamOptions& options) = 0;
  // `n` events, packed: a graph has one per instruction another stream
  // waits on, often thousands.
  virtual StatusOr<std::unique_ptr<EventArray>> CreateEvents(int n) = 0;

  // `bytes` of device memory, 64-byte aligned, for work issued on `stream`
  // from now on. Stream-ordered: the memory returns to the device when the
  // last reference is dropped, once the work issued by then on `stream`
  // and on every stream it was marked used on (MarkUsedOn) has finished.
  // ResourceExhausted naming the device and size when none is left.
  virtual StatusOr<std::shared_ptr<void>> Allocate(int64_t bytes, Stream* stream) = 0;
  virtual void MarkUsedOn(const std::shared_ptr<void>& memory, Stream* stream) {
    (void)memory;
    (void)stream;
  }

  // Ordered on `stream`. `dst` and `src` are this device's memory, or the
  // host's where the name says so.
  virtual Status Copy(void* dst, const void* src, int64_t bytes, Stream* stream) = 0;
  virtual Status CopyFromHost(void* dst, const void* host_src, int64_t bytes,
                              Stream* stream) = 0;
  virtual Status CopyToHost(void* host_dst, const void* src, int64_t bytes,
                            Stream* stream) = 0;
  virtual Status Memset(void* dst, int byte, int64_t bytes, Stream* stream) = 0;

  // What Allocate has handed out and not yet had back: now, and the most
  // at once since ResetPeakBytes (or creation); all zero where the device
  // does not count (a CUDA device does not, yet).
  struct MemoryInUse {
    int64_t bytes = 0;
    int64_t peak_bytes = 0;
  };
  virtual MemoryInUse Memory() const { return {}; }
  virtual void ResetPeakBytes() {}
};

// CUDA device `ordinal` (cuda/cuda_device.h): Unavailable, saying why, where
// there is none; Unimplemented where the build has no CUDA backend.
StatusOr<std::unique_ptr<Device>> CreateCudaDevice(int ordinal);

}  // namespace loom

#endif  // LOOM_EXECUTOR_DEVICE_H_
