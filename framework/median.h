// The median of a list of timings, what every profiler, the straggler watch
// and `loom run` report, so that a few samples slowed by the host do not
// move the value; and their spread, what says whether steps are steady.
#ifndef LOOM_FRAMEWORK_MEDIAN_H_
#define LOOM_FRAMEWORK_MEDIAN_H_

#include <algorithm>
#include <cmath>
#include <vector>

#include <glog/logging.h>

namespace loom {

// The middle value of `v`, or the mean of the two middle values when there
// is an even number. `v` must not be empty.
inline double Median(std::vector<double> v) {
  CHECK(!v.empty()) << "the median of no values";
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  if (v.size() % 2) return v[mid];
  // The lower middle value is the largest of those before `mid`.
  return 0.5 * (*std::max_element(v.begin(), v.begin() + mid) + v[mid]);
}

// The population standard deviation of `v` over its mean; 0 for no values
// or a mean of 0.
inline double CoefficientOfVariation(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double mean = 0;
  for (double x : v) mean += x / v.size();
  if (mean == 0) return 0;
  double variance = 0;
  for (double x : v) variance += (x - mean) * (x - mean) / v.size();
  return std::sqrt(variance) / mean;
}

}  // namespace loom

#endif  // LOOM_FRAMEWORK_MEDIAN_H_
