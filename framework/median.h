// The median of a list of timings: what every profiler reports, so that a
// few samples slowed by the host do not move the value.
#ifndef LOOM_FRAMEWORK_MEDIAN_H_
#define LOOM_FRAMEWORK_MEDIAN_H_

#include <algorithm>
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

}  // namespace loom

#endif  // LOOM_FRAMEWORK_MEDIAN_H_
