#include "executor/cpu/host_memory_cache.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace loom {
namespace {

constexpr int64_t kMiB = 1 << 20;

bool Aligned(const std::shared_ptr<void>& p) {
  return reinterpret_cast<uintptr_t>(p.get()) % HostMemoryCache::kAlign == 0;
}

TEST(HostMemoryCache, ABlockLetGoServesTheNextRequestOfItsSize) {
  if (!HostMemoryCache::kCaches) GTEST_SKIP() << "the cache is off under AddressSanitizer";
  HostMemoryCache cache;
  void* first = nullptr;
  {
    std::shared_ptr<void> a = cache.Allocate(4 * kMiB);
    ASSERT_NE(a, nullptr);
    EXPECT_TRUE(Aligned(a));
    std::memset(a.get(), 1, 4 * kMiB);
    first = a.get();
    EXPECT_EQ(cache.stats().in_use, 4 * kMiB);
  }
  EXPECT_EQ(cache.stats().in_use, 0);
  EXPECT_EQ(cache.stats().cached, 4 * kMiB);
  // A step later: the same size, and one a little smaller, find the block.
  std::shared_ptr<void> b = cache.Allocate(4 * kMiB - 100);
  EXPECT_EQ(b.get(), first);
  EXPECT_EQ(cache.stats().reuses, 1);
  EXPECT_EQ(cache.stats().system_allocations, 1);
  EXPECT_EQ(cache.stats().cached, 0);
}

TEST(HostMemoryCache, ARequestTakesNoBlockOverTwiceItsSize) {
  if (!HostMemoryCache::kCaches) GTEST_SKIP() << "the cache is off under AddressSanitizer";
  HostMemoryCache cache;
  cache.Allocate(8 * kMiB).reset();
  std::shared_ptr<void> small = cache.Allocate(1 * kMiB);
  EXPECT_EQ(cache.stats().reuses, 0);
  EXPECT_EQ(cache.stats().system_allocations, 2);
  EXPECT_EQ(cache.stats().cached, 8 * kMiB);
  // Within twice: reused, and counted in use at the block's size.
  std::shared_ptr<void> big = cache.Allocate(5 * kMiB);
  EXPECT_EQ(cache.stats().reuses, 1);
  EXPECT_EQ(cache.stats().in_use, 9 * kMiB);
}

TEST(HostMemoryCache, HoldsNoMoreThanThePeakInUse) {
  if (!HostMemoryCache::kCaches) GTEST_SKIP() << "the cache is off under AddressSanitizer";
  HostMemoryCache cache;
  // Growing sizes that never fit each other: without a bound the cache
  // would keep all of them.
  for (int i = 1; i <= 6; ++i) cache.Allocate(int64_t{1} << (20 + i)).reset();
  const HostMemoryCache::Stats s = cache.stats();
  EXPECT_EQ(s.peak_in_use, int64_t{1} << 26);
  EXPECT_LE(s.cached, s.peak_in_use);
  EXPECT_EQ(s.in_use, 0);
  cache.Empty();
  EXPECT_EQ(cache.stats().cached, 0);
}

TEST(HostMemoryCache, SmallBlocksGoStraightToMalloc) {
  HostMemoryCache cache;
  std::shared_ptr<void> a = cache.Allocate(100);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(Aligned(a));
  a.reset();
  EXPECT_EQ(cache.stats().cached, 0);
  EXPECT_EQ(cache.stats().system_allocations, 0);
  // Zero bytes is still a block a tensor can point at.
  EXPECT_NE(cache.Allocate(0), nullptr);
}

TEST(HostMemoryCache, AnAbsurdRequestIsNullNotACrash) {
  HostMemoryCache cache;
  cache.Allocate(4 * kMiB).reset();
  // Rounding that overflows never reaches the allocator.
  EXPECT_EQ(cache.Allocate(std::numeric_limits<int64_t>::max()), nullptr);
  // (ASan's allocator aborts on a request this size instead of failing it.)
  if (HostMemoryCache::kCaches) {
    EXPECT_EQ(cache.Allocate(int64_t{1} << 62), nullptr);
  }
}

TEST(HostMemoryCache, APoolGetsBackItsOwnBlockBeforeAnothers) {
  if (!HostMemoryCache::kCaches) GTEST_SKIP() << "the cache is off under AddressSanitizer";
  HostMemoryCache cache;
  const int pool_a = HostMemoryCache::NewPool();
  const int pool_b = HostMemoryCache::NewPool();
  ASSERT_NE(pool_a, pool_b);
  // Two ranks' blocks of one size, a's let go first: b's next request
  // finds b's own, though a's has waited longer.
  std::shared_ptr<void> a = cache.Allocate(2 * kMiB, pool_a);
  std::shared_ptr<void> b = cache.Allocate(2 * kMiB, pool_b);
  void* a_block = a.get();
  void* b_block = b.get();
  a.reset();
  b.reset();
  EXPECT_EQ(cache.Allocate(2 * kMiB, pool_b).get(), b_block);
  EXPECT_EQ(cache.Allocate(2 * kMiB, pool_a).get(), a_block);
  EXPECT_EQ(cache.stats().reuses, 2);
  EXPECT_EQ(cache.stats().reuses_across_pools, 0);
}

TEST(HostMemoryCache, APoolWithoutAFitTakesAnothersBlockBeforeTheSystems) {
  if (!HostMemoryCache::kCaches) GTEST_SKIP() << "the cache is off under AddressSanitizer";
  HostMemoryCache cache;
  const int pool_a = HostMemoryCache::NewPool();
  const int pool_b = HostMemoryCache::NewPool();
  void* a_block = nullptr;
  {
    std::shared_ptr<void> a = cache.Allocate(2 * kMiB, pool_a);
    std::shared_ptr<void> b = cache.Allocate(1 * kMiB, pool_b);  // b's own is too small
    a_block = a.get();
  }
  std::shared_ptr<void> c = cache.Allocate(2 * kMiB, pool_b);
  EXPECT_EQ(c.get(), a_block);
  EXPECT_EQ(cache.stats().reuses_across_pools, 1);
  EXPECT_EQ(cache.stats().system_allocations, 2);
  // Let go, it goes back to the pool that asked for it.
  c.reset();
  std::shared_ptr<void> d = cache.Allocate(2 * kMiB, pool_b);
  EXPECT_EQ(d.get(), a_block);
  EXPECT_EQ(cache.stats().reuses_across_pools, 1);
}

TEST(HostMemoryCache, ThreadsShareOneCache) {
  HostMemoryCache cache;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < 200; ++i) {
        std::shared_ptr<void> p = cache.Allocate((1 + (i + t) % 3) * 256 * 1024);
        ASSERT_NE(p, nullptr);
        static_cast<char*>(p.get())[0] = static_cast<char>(i);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(cache.stats().in_use, 0);
}

}  // namespace
}  // namespace loom
