// Host memory that tensors let go, kept for the next tensor of about its
// size. glibc hands blocks of more than its mmap threshold back to the OS
// on free (munmap, or a heap trim), so a runtime that frees a step's
// activations and allocates them again next step page-faults every one of
// them afresh, and a step's first touch of its memory costs several times
// the op (measured: docs/performance.md, "Measurements behind the code"). The CUDA
// allocator keeps its blocks for another reason (cudaFree synchronizes);
// here CPU streams run work as it is issued, so a block is reusable as
// soon as its last reference goes.
//
// A request takes the smallest cached block of at least its size and at
// most twice it. The cache never holds more than the peak bytes in use at
// once, so a process holds at most twice its peak. Blocks under
// kSmallBytes go straight to malloc, which keeps those in its own bins.
// Under AddressSanitizer every request goes straight to the system too, so
// that a use after free stays a report and not a read of a reused block.
//
// A block goes back to the pool it was asked from, and a request looks in
// its own pool first: ranks that run in one process (a pool each) reuse
// their own blocks, still in their core's cache, where a block taken by a
// rank on another core made that rank's memory-bound ops pull it across
// (docs/performance.md, "A pool per rank"). Another pool's block still
// beats fresh pages.
#ifndef LOOM_EXECUTOR_CPU_HOST_MEMORY_CACHE_H_
#define LOOM_EXECUTOR_CPU_HOST_MEMORY_CACHE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#if defined(__SANITIZE_ADDRESS__)
#define LOOM_HOST_MEMORY_CACHE_ON 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LOOM_HOST_MEMORY_CACHE_ON 0
#endif
#endif
#ifndef LOOM_HOST_MEMORY_CACHE_ON
#define LOOM_HOST_MEMORY_CACHE_ON 1
#endif

namespace loom {

class HostMemoryCache {
 public:
  static constexpr int64_t kAlign = 64;
  static constexpr int64_t kSmallBytes = 64 << 10;
  // False under AddressSanitizer: every request goes to the system.
  static constexpr bool kCaches = LOOM_HOST_MEMORY_CACHE_ON;

  // The process's cache; never destroyed, so that memory freed during
  // static destruction still has somewhere to go.
  static HostMemoryCache* Process();

  HostMemoryCache() = default;
  ~HostMemoryCache();  // frees the cached blocks; none may still be in use
  HostMemoryCache(const HostMemoryCache&) = delete;
  HostMemoryCache& operator=(const HostMemoryCache&) = delete;

  // A pool of its own for a new user of the cache (a rank's device).
  static int NewPool();

  // kAlign-aligned memory of at least `bytes` (nullptr when the system has
  // none, even after the cache is emptied), back to `pool` when the last
  // reference goes. The cache must outlive it.
  std::shared_ptr<void> Allocate(int64_t bytes, int pool = 0);

  // Frees every cached block.
  void Empty();

  struct Stats {
    int64_t in_use = 0;       // bytes handed out and not yet let go
    int64_t cached = 0;       // bytes held for reuse
    int64_t peak_in_use = 0;
    int64_t system_allocations = 0;  // blocks the system was asked for
    int64_t reuses = 0;              // requests a cached block served
    int64_t reuses_across_pools = 0;  // of those, by another pool's block
  };
  Stats stats() const;

 private:
  using Blocks = std::multimap<int64_t, void*>;  // cached blocks by size

  // The smallest block of `pool` of at least `size` and at most twice it,
  // taken out of the cache (nullptr: none; a pool left empty is erased);
  // its size in `*block_size`.
  void* TakeLocked(std::map<int, Blocks>::iterator pool, int64_t size, int64_t* block_size);
  void Release(void* block, int64_t size, int pool);
  void EmptyLocked();

  mutable std::mutex mu_;
  std::map<int, Blocks> free_;  // by pool; only pools that hold blocks
  Stats stats_;
};

}  // namespace loom

#endif  // LOOM_EXECUTOR_CPU_HOST_MEMORY_CACHE_H_
