// How long a call waits for cores that compute: ranks (in-process over
// loopback, or the processes of a launch over its network), each pinned to
// a core of its own with a thread beside it that computes in bursts of a
// given length (same niceness, as a rank's calc thread), and all-reduces
// timed from each rank's thread. A call beside compute takes up to twenty
// times its time on idle cores, more the longer the bursts
// (docs/performance.md, "Measurements behind the code"): the waking threads wait for the op on
// the core or for a scheduler slice. FitCoreWait (profiling/core_wait_fit.h) turns the
// medians into the cluster's CoreWait.
#ifndef LOOM_PROFILING_CORE_WAIT_PROFILER_H_
#define LOOM_PROFILING_CORE_WAIT_PROFILER_H_

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "executor/comm/communicator.h"
#include "framework/status.h"
#include "profiling/loopback_ranks.h"

namespace loom {

struct CoreWaitOptions {
  int ranks = 2;  // each on a core of its own: needs as many cores
  // Compute bursts beside the calls (seconds; 0: none, the cores idle;
  // infinity: compute that never pauses).
  std::vector<double> bursts = {0, 1e-4, 3e-4, 1e-3, 3e-3,
                                std::numeric_limits<double>::infinity()};
  int64_t bytes = 16 << 10;
  int calls = 60;  // timed, per burst
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
};

struct CoreWaitTiming {
  double burst_seconds = 0;
  double median_seconds = 0;  // rank 0's calls
};

// One timing per burst, in the options' order. Medians: calls on a VM have
// a tail of wake-ups a tick late that the calls inside training steps did
// not show (docs/performance.md, "Measurements behind the code").
StatusOr<std::vector<CoreWaitTiming>> MeasureCoreWait(const CoreWaitOptions& options);

// The same measurement a few calls at a time, between other work, over
// in-process ranks connected once: loom run --interleaved_profile samples
// it between the run's steps, as it does the ops: measured minutes apart,
// the fit moved enough to move a step by 10% (docs/performance.md, "Measurements behind the code").
class CoreWaitSampler {
 public:
  // Fails (FailedPrecondition) where the ranks cannot each have a core.
  static StatusOr<std::unique_ptr<CoreWaitSampler>> Create(const CoreWaitOptions& options);

  // options.calls more calls beside each burst; the cores must be free of
  // other work meanwhile.
  Status Sample();

  // Medians over every call sampled so far, in the options' order.
  std::vector<CoreWaitTiming> Timings() const;

 private:
  CoreWaitSampler() = default;

  CoreWaitOptions options_;
  std::vector<int> cores_;
  LoopbackGroup group_;
  std::vector<std::vector<double>> calls_;  // rank 0's, per burst
};

// The same measurement from one member of `comm` (options.ranks is
// ignored), its calls and its burst thread pinned to `core`: every member
// calls it, each on a core of its own. Group rank 0 returns the timings;
// the others return none.
StatusOr<std::vector<CoreWaitTiming>> MeasureCoreWaitMember(Communicator& comm, int core,
                                                            const CoreWaitOptions& options);

}  // namespace loom

#endif  // LOOM_PROFILING_CORE_WAIT_PROFILER_H_
