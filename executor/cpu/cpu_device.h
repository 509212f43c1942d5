// The CPU backend: host memory, memcpy and memset, and CPU streams
// (cpu_stream.h). Work on a CPU stream runs as it is issued, so the
// stream-ordered parts of the Device contract hold trivially.
#ifndef LOOM_EXECUTOR_CPU_CPU_DEVICE_H_
#define LOOM_EXECUTOR_CPU_CPU_DEVICE_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "executor/cpu/host_threads.h"
#include "executor/device.h"

namespace loom {

struct CpuDeviceOptions {
  // The nice value of streams below the rank's highest priority (see
  // cpu_stream.h); 0: every stream's thread alike. Set by the runtime,
  // which knows how many ranks share the host's cores.
  int low_priority_nice = 0;
  // The core every stream thread of this device keeps to (-1: any). Set
  // by the runtime so that ranks sharing a host keep to cores of their
  // own: left to the OS, ops of a 2-rank run on a 2-core host often took a
  // scheduler tick longer than alone, and pinned they did not (measured:
  // docs/performance.md, "Measurements behind the code").
  int core = -1;
};

class CpuDevice : public Device {
 public:
  explicit CpuDevice(CpuDeviceOptions options = CpuDeviceOptions());
  // A shared CPU device with default options.
  static CpuDevice* Default();

  DeviceType type() const override { return DeviceType::kCpu; }
  const std::string& name() const override { return name_; }
  StatusOr<std::unique_ptr<Stream>> CreateStream(const StreamOptions& options) override;
  StatusOr<std::unique_ptr<EventArray>> CreateEvents(int n) override;
  StatusOr<std::shared_ptr<void>> Allocate(int64_t bytes, Stream* stream) override;
  Status Copy(void* dst, const void* src, int64_t bytes, Stream* stream) override;
  Status CopyFromHost(void* dst, const void* host_src, int64_t bytes, Stream* stream) override;
  Status CopyToHost(void* host_dst, const void* src, int64_t bytes, Stream* stream) override;
  Status Memset(void* dst, int byte, int64_t bytes, Stream* stream) override;
  MemoryInUse Memory() const override;
  void ResetPeakBytes() override;

 private:
  CpuDeviceOptions options_;
  // Shared with the deleters of what Allocate handed out, which may outlive
  // the device.
  struct Counter {
    std::atomic<int64_t> bytes{0};
    std::atomic<int64_t> peak_bytes{0};
  };
  std::shared_ptr<Counter> counter_ = std::make_shared<Counter>();
  // Its pool of the process's HostMemoryCache: ranks in one process each
  // reuse the blocks they let go, as a GPU reuses its own memory.
  const int pool_;
  std::string name_ = "cpu";
  WaitRoom room_;  // its events'; outlives them
};

// 64-byte aligned host memory (nullptr when there is none), back to the
// process's HostMemoryCache when the last reference goes: what CPU tensors
// hold. `pool`: the cache's pool it goes back to (0: the one shared by
// memory that no device asked for).
std::shared_ptr<void> AllocateHostMemory(int64_t bytes, int pool = 0);

}  // namespace loom

#endif  // LOOM_EXECUTOR_CPU_CPU_DEVICE_H_
