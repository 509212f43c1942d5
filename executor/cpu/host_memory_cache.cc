#include "executor/cpu/host_memory_cache.h"

#include <algorithm>
#include <cstdlib>
#include <limits>

namespace loom {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCaches = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kCaches = false;
#else
constexpr bool kCaches = true;
#endif
#else
constexpr bool kCaches = true;
#endif

// `bytes` rounded up to kAlign; -1 where that overflows.
int64_t Rounded(int64_t bytes) {
  constexpr int64_t a = HostMemoryCache::kAlign;
  if (bytes <= 0) return a;
  if (bytes > std::numeric_limits<int64_t>::max() - a) return -1;
  return (bytes + a - 1) / a * a;
}

}  // namespace

HostMemoryCache* HostMemoryCache::Process() {
  static HostMemoryCache* cache = new HostMemoryCache();
  return cache;
}

HostMemoryCache::~HostMemoryCache() {
  std::lock_guard<std::mutex> lock(mu_);
  EmptyLocked();
}

std::shared_ptr<void> HostMemoryCache::Allocate(int64_t bytes) {
  const int64_t size = Rounded(bytes);
  if (size < 0) return nullptr;
  if (!kCaches || size < kSmallBytes) {
    void* p = std::aligned_alloc(kAlign, size);
    if (p == nullptr) return nullptr;
    return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  }
  void* block = nullptr;
  int64_t block_size = size;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.lower_bound(size);
    if (it != free_.end() && it->first / 2 <= size) {
      block = it->second;
      block_size = it->first;
      free_.erase(it);
      stats_.cached -= block_size;
      ++stats_.reuses;
    } else {
      block = std::aligned_alloc(kAlign, size);
      if (block == nullptr && !free_.empty()) {
        EmptyLocked();
        block = std::aligned_alloc(kAlign, size);
      }
      if (block == nullptr) return nullptr;
      ++stats_.system_allocations;
    }
    stats_.in_use += block_size;
    stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  }
  return std::shared_ptr<void>(block,
                               [this, block_size](void* q) { Release(q, block_size); });
}

void HostMemoryCache::Release(void* block, int64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.in_use -= size;
  if (stats_.cached + size > stats_.peak_in_use) {
    std::free(block);
    return;
  }
  free_.emplace(size, block);
  stats_.cached += size;
}

void HostMemoryCache::Empty() {
  std::lock_guard<std::mutex> lock(mu_);
  EmptyLocked();
}

void HostMemoryCache::EmptyLocked() {
  for (const auto& [size, block] : free_) std::free(block);
  free_.clear();
  stats_.cached = 0;
}

HostMemoryCache::Stats HostMemoryCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace loom
