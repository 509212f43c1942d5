// Completion flags shared by a rank's stream threads: an instruction marks
// itself done for the current step, and an instruction that depends on it
// waits until it is. A dependency already met costs one atomic load. A
// waiter spins, then yields its core for a while (a dependency on a short
// op on another stream is usually met within microseconds, far sooner than
// a condition variable wakes a sleeper), and only then blocks.
#ifndef LOOM_EXECUTOR_STREAM_SYNC_H_
#define LOOM_EXECUTOR_STREAM_SYNC_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace loom {

class CompletionFlags {
 public:
  explicit CompletionFlags(size_t n) : done_(new std::atomic<int64_t>[n]) {
    for (size_t i = 0; i < n; ++i) done_[i].store(-1, std::memory_order_relaxed);
  }

  void MarkDone(int id, int64_t step) {
    // The store, then the load of waiters_; a waiter increments waiters_,
    // then loads the flag. Both pairs must stay in order (seq_cst), or each
    // side may miss the other's write and the waiter sleeps forever.
    done_[id].store(step, std::memory_order_seq_cst);
    if (waiters_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> lock(mu_);
      cv_.notify_all();
    }
  }

  bool IsDone(int id, int64_t step) const {
    return done_[id].load(std::memory_order_seq_cst) >= step;
  }

  // Waits until `id` is done in `step` or `abort` is set; false on abort.
  // Without `yield`, the waiter spins briefly and then blocks: a thread
  // that outranks others (a communication stream above calc) would
  // otherwise win the core back at every yield and starve them.
  bool Wait(int id, int64_t step, const std::atomic<bool>& abort, bool yield = true) {
    for (int spin = 0; spin < 64; ++spin) {
      if (IsDone(id, step)) return true;
      if (abort.load(std::memory_order_relaxed)) return false;
    }
    for (int round = 0; yield && round < kYieldRounds; ++round) {
      std::this_thread::yield();
      if (IsDone(id, step)) return true;
      if (abort.load(std::memory_order_relaxed)) return false;
    }
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return IsDone(id, step) || abort.load(); });
    waiters_.fetch_sub(1, std::memory_order_acq_rel);
    return IsDone(id, step);
  }

  // Wakes every waiter (after setting an abort flag).
  void WakeAll() {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }

 private:
  // About 100 us of yielding on this machine before sleeping.
  static constexpr int kYieldRounds = 512;
  std::unique_ptr<std::atomic<int64_t>[]> done_;
  std::atomic<int> waiters_{0};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace loom

#endif  // LOOM_EXECUTOR_STREAM_SYNC_H_
