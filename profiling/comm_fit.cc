#include "profiling/comm_fit.h"

#include <cmath>

namespace loom {

StatusOr<CommFit> FitAlphaBeta(const std::vector<CommSample>& samples, bool half_duplex,
                               double bandwidth_if_undetermined) {
  if (samples.size() < 2) {
    return InvalidArgument("fitting α and β needs at least 2 samples, got ",
                           samples.size());
  }
  // With u = steps / t, v = factor * bytes / t and c = 1 / β, the residual
  // of a sample is (α u + c v - 1); the normal equations give α and c.
  double uu = 0, uv = 0, vv = 0, u1 = 0, v1 = 0;
  for (const CommSample& s : samples) {
    if (!(s.seconds > 0)) {
      return InvalidArgument("sample '", s.label, "' has time ", s.seconds,
                             "; times must be positive");
    }
    const double u = s.terms.latency_steps / s.seconds;
    const double v = LinkByteFactor(s.terms, half_duplex) * s.bytes / s.seconds;
    uu += u * u;
    uv += u * v;
    vv += v * v;
    u1 += u;
    v1 += v;
  }
  if (vv <= 0) return InvalidArgument("no sample moves any bytes: β is undetermined");
  CommFit fit;
  // Singular when every sample has the same steps-to-bytes ratio: then
  // only their sum is known, and α is taken as 0.
  double alpha = -1, c = 0;
  const double det = uu * vv - uv * uv;
  if (std::abs(det) > 1e-12 * uu * vv) {
    alpha = (u1 * vv - v1 * uv) / det;
    c = (v1 * uu - u1 * uv) / det;
  }
  if (!(alpha >= 0)) {
    // A negative latency has no meaning: pin α to 0 and fit β alone.
    fit.latency_clamped = true;
    alpha = 0;
    c = v1 / vv;
  }
  if (!(c > 0) && bandwidth_if_undetermined > 0) {
    // β given: α u + c v = 1 in least squares over α alone.
    fit.bandwidth_pinned = true;
    fit.latency_clamped = false;
    c = 1 / bandwidth_if_undetermined;
    alpha = std::max(0.0, (u1 - c * uv) / uu);
  }
  if (!(c > 0)) {
    return InvalidArgument("β is undetermined: the times do not grow with "
                           "the bytes moved");
  }
  fit.latency_seconds = alpha;
  fit.bandwidth = 1 / c;
  double sum_sq = 0;
  for (const CommSample& s : samples) {
    const double t = alpha * s.terms.latency_steps +
                     c * LinkByteFactor(s.terms, half_duplex) * s.bytes;
    const double r = (t - s.seconds) / s.seconds;
    fit.predicted.push_back(t);
    fit.relative_residual.push_back(r);
    sum_sq += r * r;
  }
  fit.rms_relative_residual = std::sqrt(sum_sq / samples.size());
  return fit;
}

}  // namespace loom
