// Fitting a host's CoreWait (cluster.proto) to calls timed beside compute
// bursts. A call that starts at a random point of the bursts of L seconds
// on each of its k parties' cores finds the longest of k U(0, L) left, as
// the simulator takes the longest over the parties (CallStart::
// cores_busy_for), so it takes
//
//   t(L) = c + waits * E[min(max of k U(0, L), slice)]
//
// where c is the call on a busy core with nothing to wait for.
#ifndef LOOM_PROFILING_CORE_WAIT_FIT_H_
#define LOOM_PROFILING_CORE_WAIT_FIT_H_

#include <vector>

#include "framework/status.h"

namespace loom {

struct CoreWaitSample {
  double burst_seconds = 0;  // infinity: compute that never pauses
  double call_seconds = 0;
};

struct CoreWaitFit {
  double waits = 0;
  double slice_seconds = 0;
  double busy_call_seconds = 0;  // c
  // The model's time for each sample, and the rms of (predicted -
  // measured) / measured.
  std::vector<double> predicted;
  double rms_relative_residual = 0;
};

// E[min(M, slice)], M the longest of `cores` independent U(0, burst): what
// a call waits for the ops on its parties' cores, each with U(0, burst)
// left, when the OS lets it in after `slice` at the latest.
double ExpectedCoreWait(double burst_seconds, double slice_seconds, int cores = 1);

// Least squares on relative error, the calls' parties on `cores` cores:
// for each slice of a log grid (10 us to 100 ms) the best c >= 0 and
// waits >= 0, and the slice whose fit is best.
// Needs three samples with distinct bursts, one of them at least 1 ms or
// unbounded (else the slice is not determined); fails naming what is
// missing.
StatusOr<CoreWaitFit> FitCoreWait(const std::vector<CoreWaitSample>& samples, int cores = 1);

}  // namespace loom

#endif  // LOOM_PROFILING_CORE_WAIT_FIT_H_
