#include "executor/core_wait_profiler.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

#include "executor/cpu/host_threads.h"
#include "executor/loopback_ranks.h"
#include "framework/median.h"

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Computes on the calling thread's core in bursts of `burst` seconds with a
// short sleep between them, until `stop`.
void Burst(double burst, const std::atomic<bool>& stop) {
  volatile double x = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    const auto start = Clock::now();
    while ((std::isinf(burst) || Since(start) < burst) && !stop.load(std::memory_order_relaxed)) {
      for (int k = 0; k < 1000; ++k) x = x + 1e-9 * k;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

// Rank `comm`'s median call beside each burst, its thread on `core`.
StatusOr<std::vector<double>> TimeBesideBursts(Communicator& comm, int core,
                                               const CoreWaitOptions& o) {
  PinThread(pthread_self(), core);
  Tensor buf = Floats(o.bytes / 4, 1.0f);
  Tensor line_up = Floats(1, 0.0f);
  for (int i = 0; i < 3; ++i) LOOM_RETURN_IF_ERROR(comm.AllReduce({&buf}, ReduceOp::kAvg));
  std::vector<double> medians;
  for (double burst : o.bursts) {
    std::atomic<bool> stop{false};
    std::thread beside;
    if (burst > 0) {
      beside = std::thread([&] {
        PinThread(pthread_self(), core);
        Burst(burst, stop);
      });
    }
    std::vector<double> times;
    Status calls;
    for (int i = 0; i < o.calls && calls.ok(); ++i) {
      // A pause, so that the call starts at any point of a burst; then the
      // parties line up, and the call is timed.
      std::this_thread::sleep_for(std::chrono::microseconds(500));
      calls = comm.AllReduce({&line_up}, ReduceOp::kMax);
      if (!calls.ok()) break;
      const auto start = Clock::now();
      calls = comm.AllReduce({&buf}, ReduceOp::kAvg);
      times.push_back(Since(start));
    }
    stop = true;
    if (beside.joinable()) beside.join();
    LOOM_RETURN_IF_ERROR(calls);
    medians.push_back(Median(times));
  }
  return medians;
}

Status CheckOptions(const CoreWaitOptions& o) {
  if (o.bursts.empty() || o.calls < 1 || o.bytes < 4) {
    return InvalidArgument("the core-wait measurement needs bursts, calls and bytes");
  }
  return Status::OK();
}

}  // namespace

StatusOr<std::vector<CoreWaitTiming>> MeasureCoreWaitMember(Communicator& comm, int core,
                                                            const CoreWaitOptions& o) {
  LOOM_RETURN_IF_ERROR(CheckOptions(o));
  LOOM_ASSIGN_OR_RETURN(std::vector<double> medians, TimeBesideBursts(comm, core, o));
  std::vector<CoreWaitTiming> out;
  if (comm.rank() != 0) return out;
  for (size_t i = 0; i < o.bursts.size(); ++i) out.push_back({o.bursts[i], medians[i]});
  return out;
}

StatusOr<std::vector<CoreWaitTiming>> MeasureCoreWait(const CoreWaitOptions& o) {
  std::vector<int> cores = CoresOfThisProcess();
  if (o.ranks < 2 || static_cast<int>(cores.size()) < o.ranks) {
    return FailedPrecondition("the core-wait measurement needs ", std::max(2, o.ranks),
                              " ranks on cores of their own; this process may use ",
                              cores.size(), " core(s)");
  }
  LOOM_RETURN_IF_ERROR(CheckOptions(o));
  cores.resize(o.ranks);
  LOOM_ASSIGN_OR_RETURN(LoopbackGroup group,
                        ConnectLoopback(o.ranks, "core-wait", o.timeout, cores));
  std::vector<std::vector<CoreWaitTiming>> timings(o.ranks);
  LOOM_RETURN_IF_ERROR(RunRanks(o.ranks, [&](int r) -> Status {
    LOOM_ASSIGN_OR_RETURN(timings[r], MeasureCoreWaitMember(*group[r], cores[r], o));
    return Status::OK();
  }));
  return timings[0];
}

}  // namespace loom
