// Fitting a link's α and β to measured calls: each sample is one
// collective of the comm model (its CommTerms for the algorithm that ran)
// at one size, with its measured median time.
#ifndef LOOM_PROFILING_COMM_FIT_H_
#define LOOM_PROFILING_COMM_FIT_H_

#include <string>
#include <vector>

#include "cost_model/comm_model.h"
#include "framework/status.h"

namespace loom {

struct CommSample {
  std::string label;  // "allreduce n=2 65536 B", for the printed fit
  CommTerms terms;
  double bytes = 0;
  double seconds = 0;
};

struct CommFit {
  double latency_seconds = 0;  // α
  double bandwidth = 0;        // β, bytes per second
  // The model's time for each sample, and (predicted - measured) /
  // measured.
  std::vector<double> predicted;
  std::vector<double> relative_residual;
  double rms_relative_residual = 0;
  // The unconstrained fit wanted a negative α; α was pinned to 0.
  bool latency_clamped = false;
  // The times did not grow with the bytes, and β was pinned to the
  // caller's `bandwidth_if_undetermined`.
  bool bandwidth_pinned = false;
};

// Least squares on relative error: minimizes the sum over samples of
// ((steps * α + factor * bytes / β - t) / t)^2. Relative, so that the
// microsecond-scale small messages that determine α weigh as much as the
// large ones that determine β (absolute error would let the largest
// message decide both). Fails, naming the reason, when the samples cannot
// determine β (no bytes, or fewer than two samples), or when their times
// do not grow with their bytes, unless `bandwidth_if_undetermined` is
// positive: β is then pinned to it, and α fitted alone.
// `half_duplex` fits that kind of link (LinkByteFactor).
StatusOr<CommFit> FitAlphaBeta(const std::vector<CommSample>& samples, bool half_duplex = false,
                               double bandwidth_if_undetermined = 0);

}  // namespace loom

#endif  // LOOM_PROFILING_COMM_FIT_H_
