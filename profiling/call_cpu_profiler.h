// The CPU a collective call takes from its rank's core where that core
// also computes: the process CPU clock (the calling thread, Gloo's
// event-loop thread, and the kernel's time on their behalf, as the OS
// accounts it) less that of a thread computing without pause on the same
// core, over all-reduces of a few sizes back to back. Where ranks
// outnumber cores every core computes nearly all the time, and each call's
// CPU is taken from some rank's compute. Beside compute a call takes about
// twice its CPU on idle cores (measured: docs/performance.md, "Measurements behind the code"): a
// waking thread must preempt the compute, and finds its caches cold.
// FitAlphaBeta (profiling/comm_fit.h), one
// step and one byte a byte, turns the samples into the link's CallCpu.
#ifndef LOOM_PROFILING_CALL_CPU_PROFILER_H_
#define LOOM_PROFILING_CALL_CPU_PROFILER_H_

#include <chrono>
#include <cstdint>
#include <vector>

#include "executor/comm/communicator.h"
#include "framework/status.h"

namespace loom {

struct CallCpuOptions {
  std::vector<int64_t> sizes = {4 << 10, 64 << 10, 1 << 20};  // bytes a rank contributes
  double seconds_per_size = 0.5;  // calls back to back for about this long in all
  int rounds = 5;                 // the sizes in turn, this many times; medians count
  int min_calls = 5;              // a round, of each size
  // A thread computing without pause beside each rank's calls, on its
  // core; false: the cores idle between calls.
  bool beside_compute = true;
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
};

struct CallCpuSample {
  int64_t bytes = 0;
  int calls = 0;            // timed, all rounds
  double cpu_seconds = 0;   // one rank's CPU a call, the median of the rounds'
  double wall_seconds = 0;  // one call's time, the same
};

// From one member of `comm` (its own process under `loom launch`), its
// calling thread and the compute beside it on `core`: its process's CPU a
// call, one sample per size in the options' order. Every member calls it.
// Nothing else may run in the process meanwhile: the clock counts every
// thread.
StatusOr<std::vector<CallCpuSample>> MeasureCallCpuMember(Communicator& comm, int core,
                                                          const CallCpuOptions& options);

// The same with `ranks` in-process members over loopback, rank r pinned to
// core r mod the host's cores as a training rank is: the process's CPU
// over the ranks, a rank's share.
StatusOr<std::vector<CallCpuSample>> MeasureCallCpu(int ranks, const CallCpuOptions& options);

}  // namespace loom

#endif  // LOOM_PROFILING_CALL_CPU_PROFILER_H_
