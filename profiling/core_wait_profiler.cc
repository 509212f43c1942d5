#include "profiling/core_wait_profiler.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

#include "executor/cpu/host_threads.h"
#include "framework/median.h"
#include "profiling/loopback_ranks.h"

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

// Rank `comm`'s calls beside each burst (seconds, per burst), its thread
// on `core`.
StatusOr<std::vector<std::vector<double>>> TimeBesideBursts(Communicator& comm, int core,
                                                            const CoreWaitOptions& o) {
  PinThread(pthread_self(), core);
  Tensor buf = Floats(o.bytes / 4, 1.0f);
  Tensor line_up = Floats(1, 0.0f);
  for (int i = 0; i < 3; ++i) LOOM_RETURN_IF_ERROR(comm.AllReduce({&buf}, ReduceOp::kAvg));
  std::vector<std::vector<double>> times;
  for (double burst : o.bursts) {
    std::atomic<bool> stop{false};
    std::thread beside;
    if (burst > 0) {
      beside = std::thread([&] {
        PinThread(pthread_self(), core);
        Burst(burst, stop);
      });
    }
    times.emplace_back();
    Status calls;
    for (int i = 0; i < o.calls && calls.ok(); ++i) {
      // A pause, so that the call starts at any point of a burst; then the
      // parties line up, and the call is timed.
      std::this_thread::sleep_for(std::chrono::microseconds(500));
      calls = comm.AllReduce({&line_up}, ReduceOp::kMax);
      if (!calls.ok()) break;
      const auto start = Clock::now();
      calls = comm.AllReduce({&buf}, ReduceOp::kAvg);
      times.back().push_back(Since(start));
    }
    stop = true;
    if (beside.joinable()) beside.join();
    LOOM_RETURN_IF_ERROR(calls);
  }
  return times;
}

Status CheckOptions(const CoreWaitOptions& o) {
  if (o.bursts.empty() || o.calls < 1) {
    return InvalidArgument("the core-wait measurement needs bursts and calls");
  }
  if (o.bytes < 4 || o.bytes > (int64_t{1} << 30)) {
    return InvalidArgument("the core-wait measurement's calls must be 4 B to 1 GiB, got ",
                           o.bytes, " B");
  }
  return Status::OK();
}

}  // namespace

StatusOr<std::vector<CoreWaitTiming>> MeasureCoreWaitMember(Communicator& comm, int core,
                                                            const CoreWaitOptions& o) {
  LOOM_RETURN_IF_ERROR(CheckOptions(o));
  LOOM_ASSIGN_OR_RETURN(auto times, TimeBesideBursts(comm, core, o));
  std::vector<CoreWaitTiming> out;
  if (comm.rank() != 0) return out;
  for (size_t i = 0; i < o.bursts.size(); ++i) out.push_back({o.bursts[i], Median(times[i])});
  return out;
}

StatusOr<std::unique_ptr<CoreWaitSampler>> CoreWaitSampler::Create(const CoreWaitOptions& o) {
  std::vector<int> cores = CoresOfThisProcess();
  if (o.ranks < 2 || static_cast<int>(cores.size()) < o.ranks) {
    return FailedPrecondition("the core-wait measurement needs ", std::max(2, o.ranks),
                              " ranks on cores of their own; this process may use ",
                              cores.size(), " core(s)");
  }
  LOOM_RETURN_IF_ERROR(CheckOptions(o));
  std::unique_ptr<CoreWaitSampler> s(new CoreWaitSampler);
  s->options_ = o;
  s->cores_ = std::move(cores);
  s->cores_.resize(o.ranks);
  LOOM_ASSIGN_OR_RETURN(s->group_, ConnectLoopback(o.ranks, "core-wait", o.timeout, s->cores_));
  s->calls_.resize(o.bursts.size());
  return s;
}

Status CoreWaitSampler::Sample() {
  std::vector<std::vector<std::vector<double>>> times(options_.ranks);
  LOOM_RETURN_IF_ERROR(RunRanks(options_.ranks, [&](int r) -> Status {
    LOOM_ASSIGN_OR_RETURN(times[r], TimeBesideBursts(*group_[r], cores_[r], options_));
    return Status::OK();
  }));
  for (size_t i = 0; i < calls_.size(); ++i) {
    calls_[i].insert(calls_[i].end(), times[0][i].begin(), times[0][i].end());
  }
  return Status::OK();
}

std::vector<CoreWaitTiming> CoreWaitSampler::Timings() const {
  std::vector<CoreWaitTiming> out;
  for (size_t i = 0; i < calls_.size(); ++i) {
    out.push_back({options_.bursts[i], calls_[i].empty() ? 0.0 : Median(calls_[i])});
  }
  return out;
}

StatusOr<std::vector<CoreWaitTiming>> MeasureCoreWait(const CoreWaitOptions& o) {
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CoreWaitSampler> sampler, CoreWaitSampler::Create(o));
  LOOM_RETURN_IF_ERROR(sampler->Sample());
  return sampler->Timings();
}

}  // namespace loom
