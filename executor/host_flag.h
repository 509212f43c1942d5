// A flag one host thread raises for a generation (a training step) and
// others wait on: the host side of every backend's Event. On CPU the flag
// is the event (the work is done when it is raised); on CUDA it says the
// event's record was issued, so that a waiting stream's cudaStreamWaitEvent
// comes after the cudaEventRecord it must see.
//
// A wait already met costs one atomic load. A waiter spins, then yields its
// core for a while (a dependency on a short op on another stream is usually
// met within microseconds, far sooner than a condition variable wakes a
// sleeper), and only then blocks, in the WaitRoom the device's flags share.
// A flag is one atomic, so that a graph's thousands of events stay packed:
// in stream_bench, events of 48 bytes each cost ~15% per instruction
// against an array of flags, through the cache misses they caused.
#ifndef LOOM_EXECUTOR_HOST_FLAG_H_
#define LOOM_EXECUTOR_HOST_FLAG_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace loom {

// Where the threads waiting on a device's flags sleep: a raise wakes every
// sleeper, and each checks its own flag again. Sleeping is the slow path,
// taken only after ~100 us of spinning and yielding.
class WaitRoom {
 public:
  // Wakes every sleeper (after an abort flag was set).
  void WakeAll() {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }

 private:
  friend class HostFlag;
  std::atomic<int> sleepers_{0};
  std::mutex mu_;
  std::condition_variable cv_;
};

class HostFlag {
 public:
  void Raise(int64_t generation, WaitRoom& room) {
    // The store, then the load of sleepers_; a waiter increments sleepers_,
    // then loads the flag. Both pairs must stay in order (seq_cst), or each
    // side may miss the other's write and the waiter sleeps forever.
    raised_.store(generation, std::memory_order_seq_cst);
    if (room.sleepers_.load(std::memory_order_seq_cst) > 0) room.WakeAll();
  }

  bool IsRaised(int64_t generation) const {
    return raised_.load(std::memory_order_seq_cst) >= generation;
  }

  // Waits until the flag is raised for `generation` or `abort` is set;
  // false on abort. Without `yield`, the waiter spins briefly and then
  // blocks: a thread that outranks others (a communication stream above
  // calc) would otherwise win the core back at every yield and starve them.
  bool Wait(int64_t generation, WaitRoom& room, const std::atomic<bool>& abort, bool yield) {
    for (int spin = 0; spin < 64; ++spin) {
      if (IsRaised(generation)) return true;
      if (abort.load(std::memory_order_relaxed)) return false;
    }
    for (int round = 0; yield && round < kYieldRounds; ++round) {
      std::this_thread::yield();
      if (IsRaised(generation)) return true;
      if (abort.load(std::memory_order_relaxed)) return false;
    }
    room.sleepers_.fetch_add(1, std::memory_order_seq_cst);
    std::unique_lock<std::mutex> lock(room.mu_);
    room.cv_.wait(lock, [&] { return IsRaised(generation) || abort.load(); });
    room.sleepers_.fetch_sub(1, std::memory_order_acq_rel);
    return IsRaised(generation);
  }

 private:
  // About 100 us of yielding on this machine before sleeping.
  static constexpr int kYieldRounds = 512;
  std::atomic<int64_t> raised_{-1};
};

}  // namespace loom

#endif  // LOOM_EXECUTOR_HOST_FLAG_H_
