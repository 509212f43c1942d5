#include "executor/cpu/cpu_device.h"

#include <cstring>

#include "executor/cpu/cpu_stream.h"
#include "executor/cpu/host_memory_cache.h"

namespace loom {

std::shared_ptr<void> AllocateHostMemory(int64_t bytes, int pool) {
  return HostMemoryCache::Process()->Allocate(bytes, pool);
}

CpuDevice::CpuDevice(CpuDeviceOptions options)
    : options_(options), pool_(HostMemoryCache::NewPool()) {}

CpuDevice* CpuDevice::Default() {
  static CpuDevice* device = new CpuDevice();
  return device;
}

StatusOr<std::unique_ptr<Stream>> CpuDevice::CreateStream(const StreamOptions& options) {
  const bool ranked = options_.low_priority_nice != 0 && options.lowest < options.highest;
  const int nice = ranked && options.priority < options.highest ? options_.low_priority_nice : 0;
  const bool outranks = ranked && options.priority == options.highest;
  return std::unique_ptr<Stream>(new CpuStream(options, nice, outranks, options_.core, &room_));
}

StatusOr<std::unique_ptr<EventArray>> CpuDevice::CreateEvents(int n) {
  return std::make_unique<EventArray>(n, &room_);
}

StatusOr<std::shared_ptr<void>> CpuDevice::Allocate(int64_t bytes, Stream*) {
  std::shared_ptr<void> memory = AllocateHostMemory(bytes, pool_);
  if (memory == nullptr) {
    return ResourceExhausted("cpu: out of memory allocating ", bytes, " bytes");
  }
  // Counted while held: the deleter gives the bytes back to the count.
  const int64_t now = counter_->bytes.fetch_add(bytes) + bytes;
  int64_t peak = counter_->peak_bytes.load();
  while (now > peak && !counter_->peak_bytes.compare_exchange_weak(peak, now)) {
  }
  void* data = memory.get();
  return std::shared_ptr<void>(data, [memory = std::move(memory), counter = counter_,
                                      bytes](void*) mutable {
    memory.reset();
    counter->bytes.fetch_sub(bytes);
  });
}

Device::MemoryInUse CpuDevice::Memory() const {
  return {counter_->bytes.load(), counter_->peak_bytes.load()};
}

void CpuDevice::ResetPeakBytes() { counter_->peak_bytes.store(counter_->bytes.load()); }

Status CpuDevice::Copy(void* dst, const void* src, int64_t bytes, Stream*) {
  if (bytes > 0) std::memmove(dst, src, bytes);
  return Status::OK();
}

Status CpuDevice::CopyFromHost(void* dst, const void* host_src, int64_t bytes, Stream* stream) {
  return Copy(dst, host_src, bytes, stream);
}

Status CpuDevice::CopyToHost(void* host_dst, const void* src, int64_t bytes, Stream* stream) {
  return Copy(host_dst, src, bytes, stream);
}

Status CpuDevice::Memset(void* dst, int byte, int64_t bytes, Stream*) {
  if (bytes > 0) std::memset(dst, byte, bytes);
  return Status::OK();
}

}  // namespace loom
