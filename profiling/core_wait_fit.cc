#include "profiling/core_wait_fit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace loom {

double ExpectedCoreWait(double burst, double slice, int cores) {
  if (std::isinf(burst)) return slice;
  // The longest of k independent U(0, L) has P(M > x) = 1 - (x / L)^k, and
  // E[min(M, S)] integrates that from 0 to m = min(S, L).
  const double k = std::max(1, cores);
  const double m = std::min(slice, burst);
  return m - m * std::pow(m / burst, k) / (k + 1);
}

namespace {

// min over c, w >= 0 of sum (((c + w e_i) - t_i) / t_i)^2; returns the sum.
double FitLinear(const std::vector<double>& e, const std::vector<double>& t, double* c,
                 double* w) {
  // With x_i = (1 / t_i, e_i / t_i) the problem is sum (x_i . (c, w) - 1)^2.
  double a11 = 0, a12 = 0, a22 = 0, b1 = 0, b2 = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    const double x1 = 1 / t[i], x2 = e[i] / t[i];
    a11 += x1 * x1;
    a12 += x1 * x2;
    a22 += x2 * x2;
    b1 += x1;
    b2 += x2;
  }
  auto cost = [&](double cc, double ww) {
    double s = 0;
    for (size_t i = 0; i < e.size(); ++i) {
      const double r = (cc + ww * e[i] - t[i]) / t[i];
      s += r * r;
    }
    return s;
  };
  // The unconstrained optimum, then each bound alone where it is violated.
  const double det = a11 * a22 - a12 * a12;
  std::vector<std::pair<double, double>> options;
  if (det > 0) options.emplace_back((b1 * a22 - b2 * a12) / det, (a11 * b2 - a12 * b1) / det);
  options.emplace_back(b1 / a11, 0.0);
  if (a22 > 0) options.emplace_back(0.0, b2 / a22);
  double best = std::numeric_limits<double>::infinity();
  for (const auto& [cc, ww] : options) {
    if (cc < 0 || ww < 0) continue;
    const double s = cost(cc, ww);
    if (s < best) {
      best = s;
      *c = cc;
      *w = ww;
    }
  }
  return best;
}

}  // namespace

StatusOr<CoreWaitFit> FitCoreWait(const std::vector<CoreWaitSample>& samples, int cores) {
  std::set<double> bursts;
  bool long_burst = false;
  for (const CoreWaitSample& s : samples) {
    if (!(s.burst_seconds > 0) || !(s.call_seconds > 0) || std::isinf(s.call_seconds)) {
      return InvalidArgument("core-wait fit: a sample needs a positive burst and call time, got ",
                             s.burst_seconds, " s and ", s.call_seconds, " s");
    }
    bursts.insert(s.burst_seconds);
    long_burst = long_burst || s.burst_seconds >= 1e-3;
  }
  if (bursts.size() < 3) {
    return InvalidArgument("core-wait fit: needs calls beside 3 burst lengths or more, got ",
                           bursts.size());
  }
  if (!long_burst) {
    return InvalidArgument("core-wait fit: needs a burst of 1 ms or more (or unbounded) to "
                           "find the slice");
  }
  std::vector<double> t;
  for (const CoreWaitSample& s : samples) t.push_back(s.call_seconds);
  CoreWaitFit fit;
  double best = std::numeric_limits<double>::infinity();
  constexpr int kGrid = 200;
  for (int k = 0; k <= kGrid; ++k) {
    const double slice = 1e-5 * std::pow(1e4, static_cast<double>(k) / kGrid);
    std::vector<double> e;
    for (const CoreWaitSample& s : samples) {
      e.push_back(ExpectedCoreWait(s.burst_seconds, slice, cores));
    }
    double c = 0, w = 0;
    const double cost = FitLinear(e, t, &c, &w);
    if (cost < best) {
      best = cost;
      fit.busy_call_seconds = c;
      fit.waits = w;
      fit.slice_seconds = slice;
    }
  }
  for (const CoreWaitSample& s : samples) {
    const double wait = ExpectedCoreWait(s.burst_seconds, fit.slice_seconds, cores);
    fit.predicted.push_back(fit.busy_call_seconds + fit.waits * wait);
  }
  double sum = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    const double r = (fit.predicted[i] - t[i]) / t[i];
    sum += r * r;
  }
  fit.rms_relative_residual = std::sqrt(sum / samples.size());
  return fit;
}

}  // namespace loom
