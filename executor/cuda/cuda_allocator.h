// A stream-ordered caching allocator for one CUDA device, as frameworks on
// CUDA keep one: cudaMalloc and cudaFree synchronize the device, so memory
// a tensor lets go is kept and handed out again, not returned.
//
// A block belongs to the stream it was allocated on. Freed, it is at once
// reusable by that stream: later work there runs after the work that used
// it. A block also used on other streams (Device::MarkUsedOn) waits, on
// free, for an event recorded on each of them, and is reusable only once
// all have passed. Under memory pressure the cache is emptied and the
// allocation tried again before ResourceExhausted.
#ifndef LOOM_EXECUTOR_CUDA_CUDA_ALLOCATOR_H_
#define LOOM_EXECUTOR_CUDA_CUDA_ALLOCATOR_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "framework/status.h"

namespace loom {

class CudaAllocator {
 public:
  explicit CudaAllocator(int device) : device_(device) {}
  ~CudaAllocator();
  CudaAllocator(const CudaAllocator&) = delete;
  CudaAllocator& operator=(const CudaAllocator&) = delete;

  // Memory that returns to this allocator when the last reference goes.
  // The allocator must outlive it.
  StatusOr<std::shared_ptr<void>> Allocate(int64_t bytes, cudaStream_t stream);
  void MarkUsedOn(const void* memory, cudaStream_t stream);

  struct Stats {
    int64_t in_use = 0;      // bytes handed out
    int64_t cached = 0;      // bytes held for reuse (and pending frees)
    int64_t peak_in_use = 0;
    int64_t device_allocations = 0;  // cudaMalloc calls
  };
  Stats stats() const;

  // Rounding: 512 bytes, so that views of a block stay aligned for any
  // vectorized access; requests reuse a cached block up to twice their size.
  static int64_t RoundUp(int64_t bytes) { return (bytes + 511) / 512 * 512 + (bytes == 0) * 512; }

 private:
  struct Block {
    void* ptr = nullptr;
    int64_t size = 0;
    cudaStream_t stream = nullptr;
    std::vector<cudaStream_t> used_on;  // other streams
  };
  struct Pending {
    Block block;
    std::vector<cudaEvent_t> events;
  };
  void Release(void* ptr);
  // Moves pending blocks whose events have all passed to the cache.
  void CollectPendingLocked();
  // cudaFree of every cached block (pending ones wait for their events).
  void EmptyCacheLocked();
  StatusOr<cudaEvent_t> EventLocked();

  const int device_;
  mutable std::mutex mu_;
  std::unordered_map<void*, Block> live_;
  // Cached blocks by (stream, size).
  std::multimap<std::pair<cudaStream_t, int64_t>, void*> free_;
  std::vector<Pending> pending_;
  std::vector<cudaEvent_t> spare_events_;
  Stats stats_;
};

}  // namespace loom

#endif  // LOOM_EXECUTOR_CUDA_CUDA_ALLOCATOR_H_
