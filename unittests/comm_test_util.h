// Helpers for multi-rank communication tests: one thread per rank, bounded
// so that a hang aborts the binary loudly instead of stalling CI.
#ifndef LOOM_UNITTESTS_COMM_TEST_UTIL_H_
#define LOOM_UNITTESTS_COMM_TEST_UTIL_H_

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gloo/rendezvous/hash_store.h>
#include <gtest/gtest.h>

#include "executor/comm/gloo_communicator.h"

namespace loom {
namespace testing {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

inline double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Runs fn(r) for r in 0..n-1, one thread each, and joins them. Ranks still
// running after `limit` abort the binary: a hang is a failure, loudly.
inline void RunRanks(int n, const std::function<void(int)>& fn,
              seconds limit = seconds(20)) {
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      fn(r);
      std::lock_guard<std::mutex> lock(mu);
      ++done;
      cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, limit, [&] { return done == n; })) {
      std::fprintf(stderr, "%d of %d ranks still running after %lld s\n",
                   n - done, n, static_cast<long long>(limit.count()));
      std::abort();
    }
  }
  for (auto& t : threads) t.join();
}

// A one-shot latch for ranks that must wait for each other in a test.
class Latch {
 public:
  explicit Latch(int count) : count_(count) {}
  void CountDown() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--count_ <= 0) cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return count_ <= 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_;
};

using Group = std::vector<std::unique_ptr<GlooCommunicator>>;

// Connects the group `members` (global ranks) through a fresh HashStore,
// one thread per member.
inline Group MakeGroup(const std::vector<int>& members,
                milliseconds timeout = seconds(10)) {
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  const int n = static_cast<int>(members.size());
  const std::string name = GroupName("g", members);
  Group comms(n);
  RunRanks(n, [&](int r) {
    auto device = CreateGlooTcpDevice();
    ASSERT_TRUE(device.ok()) << device.status();
    auto comm =
        GlooCommunicator::Create(name, members, members[r], store.get(),
                                 "test/" + name, *device, CommOptions{timeout});
    ASSERT_TRUE(comm.ok()) << comm.status();
    comms[r] = std::move(comm).value();
  });
  for (const auto& c : comms) EXPECT_NE(c, nullptr);
  return comms;
}

inline std::vector<int> Iota(int n, int first = 0) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = first + i;
  return v;
}

inline Tensor Filled(int64_t n, const std::function<float(int64_t)>& f) {
  Tensor t(TensorMeta{proto::FP32, {n}});
  float* p = t.data<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = f(i);
  return t;
}

inline bool SameBits(const Tensor& a, const Tensor& b) {
  return a.bytes() == b.bytes() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.bytes()) == 0;
}

// Integer-valued inputs: sums of four stay exact, so results have closed

}  // namespace testing
}  // namespace loom

#endif  // LOOM_UNITTESTS_COMM_TEST_UTIL_H_
