#include "executor/cpu/host_memory_cache.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iterator>
#include <limits>

namespace loom {
namespace {

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

int HostMemoryCache::NewPool() {
  static std::atomic<int> next{1};  // 0: the pool of those that name none
  return next.fetch_add(1);
}

HostMemoryCache::~HostMemoryCache() {
  std::lock_guard<std::mutex> lock(mu_);
  EmptyLocked();
}

void* HostMemoryCache::TakeLocked(std::map<int, Blocks>::iterator pool, int64_t size,
                                  int64_t* block_size) {
  Blocks& blocks = pool->second;
  auto it = blocks.lower_bound(size);
  if (it == blocks.end() || it->first / 2 > size) return nullptr;
  void* block = it->second;
  *block_size = it->first;
  blocks.erase(it);
  if (blocks.empty()) free_.erase(pool);
  return block;
}

std::shared_ptr<void> HostMemoryCache::Allocate(int64_t bytes, int pool) {
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
    // The pool's own block, else another's: only pools holding blocks
    // are in free_.
    auto own = free_.find(pool);
    if (own != free_.end()) block = TakeLocked(own, size, &block_size);
    for (auto it = free_.begin(); block == nullptr && it != free_.end();) {
      auto next = std::next(it);  // TakeLocked may erase it
      if (it->first != pool) {
        block = TakeLocked(it, size, &block_size);
        if (block != nullptr) ++stats_.reuses_across_pools;
      }
      it = next;
    }
    if (block != nullptr) {
      stats_.cached -= block_size;
      ++stats_.reuses;
    } else {
      block_size = size;
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
                               [this, block_size, pool](void* q) { Release(q, block_size, pool); });
}

void HostMemoryCache::Release(void* block, int64_t size, int pool) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.in_use -= size;
  if (stats_.cached + size > stats_.peak_in_use) {
    std::free(block);
    return;
  }
  free_[pool].emplace(size, block);
  stats_.cached += size;
}

void HostMemoryCache::Empty() {
  std::lock_guard<std::mutex> lock(mu_);
  EmptyLocked();
}

void HostMemoryCache::EmptyLocked() {
  for (const auto& [pool, blocks] : free_) {
    for (const auto& [size, block] : blocks) std::free(block);
  }
  free_.clear();
  stats_.cached = 0;
}

HostMemoryCache::Stats HostMemoryCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace loom
