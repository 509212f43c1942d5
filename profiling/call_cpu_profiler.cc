#include "profiling/call_cpu_profiler.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <string>
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

double Seconds(const timespec& t) { return t.tv_sec + 1e-9 * t.tv_nsec; }

double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return Seconds(t);
}

// A thread on each of `cores` computing without pause (at the callers'
// niceness, as a rank's calc thread) while alive, and the CPU they have
// used: what the calls' CPU is measured beside, and not counted.
class BusyCores {
 public:
  explicit BusyCores(const std::vector<int>& cores) {
    for (int core : cores) {
      threads_.emplace_back([this, core] {
        PinThread(pthread_self(), core);
        volatile double x = 0;
        while (!stop_.load(std::memory_order_relaxed)) {
          for (int k = 0; k < 1000; ++k) x = x + 1e-9 * k;
        }
      });
    }
  }
  ~BusyCores() {
    stop_ = true;
    for (std::thread& t : threads_) t.join();
  }
  double CpuSeconds() {
    double sum = 0;
    for (std::thread& t : threads_) {
      clockid_t clock;
      timespec ts{};
      if (pthread_getcpuclockid(t.native_handle(), &clock) == 0 &&
          clock_gettime(clock, &ts) == 0) {
        sum += Seconds(ts);
      }
    }
    return sum;
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

// MeasureCallCpuMember's calls and clocks: the process's CPU less
// `not_counted`'s, a call.
StatusOr<std::vector<CallCpuSample>> TimeRounds(Communicator& comm, const CallCpuOptions& o,
                                                const std::function<double()>& not_counted) {
  if (o.sizes.empty()) return InvalidArgument("call CPU: no sizes to measure");
  if (o.rounds < 1) return InvalidArgument("call CPU: rounds must be at least 1, got ", o.rounds);
  std::vector<Tensor> bufs;
  for (int64_t bytes : o.sizes) {
    if (bytes < 4 || bytes > (int64_t{1} << 30)) {
      return InvalidArgument("call CPU: sizes must be 4 B to 1 GiB, got ", bytes, " B");
    }
    bufs.push_back(Floats(bytes / 4, 1.0f));
  }
  // Calls a round of each size: a few calls untimed (buffers, first
  // touches) set how many fill the size's share of a round, by their mean
  // (beside compute some calls wait for a core and most do not); every
  // member takes the slowest member's count, so that none waits at the end.
  Tensor agree = Floats(static_cast<int64_t>(o.sizes.size()), 0.0f);
  constexpr int kProbeCalls = 8;
  for (size_t i = 0; i < o.sizes.size(); ++i) {
    const auto start = Clock::now();
    for (int k = 0; k < kProbeCalls; ++k) {
      LOOM_RETURN_IF_ERROR(comm.AllReduce({&bufs[i]}, ReduceOp::kAvg));
    }
    agree.data<float>()[i] = static_cast<float>(Since(start) / kProbeCalls);
  }
  LOOM_RETURN_IF_ERROR(comm.AllReduce({&agree}, ReduceOp::kMax));
  std::vector<CallCpuSample> samples(o.sizes.size());
  for (size_t i = 0; i < o.sizes.size(); ++i) {
    const double per_call = std::max(1e-6, static_cast<double>(agree.data<float>()[i]));
    samples[i].bytes = o.sizes[i];
    samples[i].calls =
        std::max(o.min_calls, static_cast<int>(o.seconds_per_size / o.rounds / per_call));
  }
  // The sizes in turn, round after round, and each size's median: a
  // neighbour's burst, or a run of calls that wait a VM tick to be woken,
  // spoils one round of one size.
  std::vector<std::vector<double>> cpu(o.sizes.size()), wall(o.sizes.size());
  auto counted = [&] { return ProcessCpuSeconds() - not_counted(); };
  for (int round = 0; round < o.rounds; ++round) {
    for (size_t i = 0; i < o.sizes.size(); ++i) {
      const double cpu0 = counted();
      const auto start = Clock::now();
      for (int k = 0; k < samples[i].calls; ++k) {
        LOOM_RETURN_IF_ERROR(comm.AllReduce({&bufs[i]}, ReduceOp::kAvg));
      }
      wall[i].push_back(Since(start) / samples[i].calls);
      cpu[i].push_back((counted() - cpu0) / samples[i].calls);
    }
  }
  for (size_t i = 0; i < o.sizes.size(); ++i) {
    samples[i].cpu_seconds = std::max(0.0, Median(cpu[i]));
    samples[i].wall_seconds = Median(wall[i]);
    samples[i].calls *= o.rounds;
  }
  return samples;
}

}  // namespace

StatusOr<std::vector<CallCpuSample>> MeasureCallCpuMember(Communicator& comm, int core,
                                                          const CallCpuOptions& o) {
  PinThread(pthread_self(), core);
  BusyCores busy(o.beside_compute ? std::vector<int>{core} : std::vector<int>{});
  return TimeRounds(comm, o, [&] { return busy.CpuSeconds(); });
}

StatusOr<std::vector<CallCpuSample>> MeasureCallCpu(int ranks, const CallCpuOptions& o) {
  if (ranks < 2) return InvalidArgument("call CPU: needs 2 ranks or more, got ", ranks);
  const std::vector<int> host = CoresOfThisProcess();
  std::vector<int> cores(ranks);
  for (int r = 0; r < ranks; ++r) cores[r] = host[r % host.size()];
  LOOM_ASSIGN_OR_RETURN(LoopbackGroup group, ConnectLoopback(ranks, "call-cpu", o.timeout, cores));
  // Every member's clock counts the whole process: each rank's calls, and
  // every rank's compute beside them, which is not counted.
  BusyCores busy(o.beside_compute ? cores : std::vector<int>{});
  std::vector<std::vector<CallCpuSample>> results(ranks);
  LOOM_RETURN_IF_ERROR(RunRanks(ranks, [&](int r) -> Status {
    PinThread(pthread_self(), cores[r]);  // the calling thread, as Gloo's is
    LOOM_ASSIGN_OR_RETURN(results[r], TimeRounds(*group[r], o, [&] { return busy.CpuSeconds(); }));
    return Status::OK();
  }));
  // The ranks called at once: rank 0's over the ranks is one rank's share.
  for (CallCpuSample& s : results[0]) s.cpu_seconds /= ranks;
  return results[0];
}

}  // namespace loom
