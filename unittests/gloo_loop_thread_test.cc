// A registered loop thread sleeps on a held mutex, for at most the bound,
// where every other thread's try-lock fails at once (gloo_loop_thread.h);
// and CreateGlooTcpDevice registers its own loop thread, and only that.
#include "executor/comm/gloo_loop_thread.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "executor/comm/gloo_device.h"
#include "executor/cpu/host_threads.h"

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;
using Micros = std::chrono::microseconds;

int64_t InMicros(Clock::duration d) { return std::chrono::duration_cast<Micros>(d).count(); }

#define SKIP_WITHOUT_LOOP_WAITS()                                                \
  if (!GlooLoopThreadsWait()) {                                                  \
    GTEST_SKIP() << "SKIPPED LOUDLY: a sanitizer's runtime owns "                \
                    "pthread_mutex_trylock in this build, so loop threads spin"; \
  }

// Registers the calling thread as a loop thread for the scope.
class AsLoopThread {
 public:
  AsLoopThread() : tid_(gettid()) { registered_ = RegisterGlooLoopThread(tid_); }
  ~AsLoopThread() { UnregisterGlooLoopThread(tid_); }
  bool registered() const { return registered_; }

 private:
  pid_t tid_;
  bool registered_;
};

TEST(GlooLoopThread, ARegisteredThreadSleepsUntilTheHolderLetsGo) {
  SKIP_WITHOUT_LOOP_WAITS();
  std::mutex mutex;
  mutex.lock();
  const int64_t waits_before = GlooLoopWaits();
  int failed_tries = 0;
  Clock::duration waited{};
  Clock::time_point acquired{};
  Clock::time_point released{};
  std::thread loop([&] {
    AsLoopThread as_loop;
    ASSERT_TRUE(as_loop.registered());
    const Clock::time_point start = Clock::now();
    // As Gloo's loop does: try again until the try-lock succeeds.
    while (pthread_mutex_trylock(mutex.native_handle()) != 0) ++failed_tries;
    acquired = Clock::now();
    waited = acquired - start;
    mutex.unlock();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  released = Clock::now();
  mutex.unlock();
  loop.join();
  // Each failed try slept for the whole bound; a spinning thread fails
  // thousands of times in the 50 ms.
  EXPECT_LE(failed_tries, InMicros(waited) / kGlooLoopWaitBound.count());
  // It took the lock only once the holder let go. (Not "waited 50 ms": the
  // thread may start its clock after the holder started its sleep.)
  EXPECT_GE(acquired, released);
  EXPECT_EQ(GlooLoopWaits() - waits_before, failed_tries + 1);
}

TEST(GlooLoopThread, AHolderThatNeverLetsGoHoldsItUpForTheBound) {
  SKIP_WITHOUT_LOOP_WAITS();
  std::mutex mutex;
  mutex.lock();
  int result = 0;
  Clock::duration waited{};
  std::thread loop([&] {
    AsLoopThread as_loop;
    const Clock::time_point start = Clock::now();
    result = pthread_mutex_trylock(mutex.native_handle());
    waited = Clock::now() - start;
  });
  loop.join();
  mutex.unlock();
  EXPECT_EQ(result, EBUSY);
  EXPECT_GE(InMicros(waited), kGlooLoopWaitBound.count());
}

TEST(GlooLoopThread, OtherThreadsFailAtOnce) {
  std::mutex mutex;
  mutex.lock();
  const int64_t waits_before = GlooLoopWaits();
  int result = 0;
  std::thread other([&] { result = pthread_mutex_trylock(mutex.native_handle()); });
  other.join();
  mutex.unlock();
  EXPECT_EQ(result, EBUSY);
  EXPECT_EQ(GlooLoopWaits(), waits_before);
  // A free mutex is taken, registered or not.
  AsLoopThread as_loop;
  ASSERT_EQ(pthread_mutex_trylock(mutex.native_handle()), 0);
  mutex.unlock();
}

TEST(GlooLoopThread, EachDeviceRegistersItsOwnLoopThreadUntilItGoes) {
  SKIP_WITHOUT_LOOP_WAITS();
  const std::set<pid_t> before = ThreadsOfThisProcess();
  auto first = CreateGlooTcpDevice();
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = CreateGlooTcpDevice();
  ASSERT_TRUE(second.ok()) << second.status();
  std::vector<pid_t> loops;
  for (pid_t tid : ThreadsOfThisProcess()) {
    if (before.count(tid) > 0) continue;
    EXPECT_EQ(ThreadName(tid), kGlooLoopThreadName) << "thread " << tid;
    EXPECT_TRUE(IsGlooLoopThread(tid)) << "thread " << tid;
    loops.push_back(tid);
  }
  ASSERT_EQ(loops.size(), 2u) << "one loop thread per device";
  EXPECT_FALSE(IsGlooLoopThread(gettid())) << "the thread that made them is not one";
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  EXPECT_STRNE(name, kGlooLoopThreadName) << "the maker keeps its own name";
  first->reset();
  second->reset();
  for (pid_t tid : loops) EXPECT_FALSE(IsGlooLoopThread(tid)) << "thread " << tid;
}

}  // namespace
}  // namespace loom
