#include "executor/comm/gloo_loop_thread.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LOOM_SANITIZER_OWNS_TRYLOCK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define LOOM_SANITIZER_OWNS_TRYLOCK 1
#endif
#endif

namespace loom {
namespace {

// Loop threads alive: one per Gloo device, so a few per process. Read
// without a lock by every try-lock that fails.
constexpr int kSlots = 256;
std::array<std::atomic<pid_t>, kSlots> loop_threads{};
// Slots past this one were never used: a failed try-lock (malloc's, say)
// looks at a few, not all.
std::atomic<int> slots_used{0};
std::atomic<int64_t> waits{0};

pid_t ThisThread() {
  thread_local const pid_t tid = gettid();
  return tid;
}

}  // namespace

bool GlooLoopThreadsWait() {
#ifdef LOOM_SANITIZER_OWNS_TRYLOCK
  return false;
#else
  return true;
#endif
}

bool RegisterGlooLoopThread(pid_t tid) {
  for (int i = 0; i < kSlots; ++i) {
    pid_t empty = 0;
    if (!loop_threads[i].compare_exchange_strong(empty, tid)) continue;
    int used = slots_used.load();
    while (used < i + 1 && !slots_used.compare_exchange_weak(used, i + 1)) {
    }
    return true;
  }
  return false;
}

void UnregisterGlooLoopThread(pid_t tid) {
  for (std::atomic<pid_t>& slot : loop_threads) {
    pid_t registered = tid;
    if (slot.compare_exchange_strong(registered, 0)) return;
  }
}

bool IsGlooLoopThread(pid_t tid) {
  const int used = slots_used.load(std::memory_order_acquire);
  for (int i = 0; i < used; ++i) {
    if (loop_threads[i].load(std::memory_order_relaxed) == tid) return true;
  }
  return false;
}

int64_t GlooLoopWaits() { return waits.load(std::memory_order_relaxed); }

}  // namespace loom

#ifndef LOOM_SANITIZER_OWNS_TRYLOCK
// Ahead of the C library's in the process's symbol lookup, so Gloo's calls
// (from libgloo.so) reach it too. See the header.
extern "C" int pthread_mutex_trylock(pthread_mutex_t* mutex) {
  using TryLock = int (*)(pthread_mutex_t*);
  static const TryLock c_library = [] {
    auto f = reinterpret_cast<TryLock>(dlsym(RTLD_NEXT, "pthread_mutex_trylock"));
    if (f == nullptr) {
      std::fprintf(stderr, "loom: the C library's pthread_mutex_trylock is not found\n");
      std::abort();
    }
    return f;
  }();
  const int result = c_library(mutex);
  if (result != EBUSY || !loom::IsGlooLoopThread(loom::ThisThread())) return result;
  loom::waits.fetch_add(1, std::memory_order_relaxed);
  timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  const long bound_ns = std::chrono::nanoseconds(loom::kGlooLoopWaitBound).count();
  until.tv_sec += (until.tv_nsec + bound_ns) / 1000000000;
  until.tv_nsec = (until.tv_nsec + bound_ns) % 1000000000;
  return pthread_mutex_clocklock(mutex, CLOCK_MONOTONIC, &until) == 0 ? 0 : EBUSY;
}
#endif
