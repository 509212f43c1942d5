// What a measurement of the links between ranks times, and where it
// reports: `loom profile --comm` fills it from its flags
// (tools/profile_comm.cc); the defaults are those flags'.
#ifndef LOOM_PROFILING_LINK_PROFILE_OPTIONS_H_
#define LOOM_PROFILING_LINK_PROFILE_OPTIONS_H_

#include <cstdint>
#include <cstdio>
#include <optional>
#include <vector>

#include "runtime/launch_env.h"

namespace loom {

struct LinkProfileOptions {
  // This process's place in a `loom launch`; none: in-process ranks over
  // loopback.
  std::optional<LaunchEnv> launch;
  // In-process ranks; under a launch, every launched rank takes part.
  int ranks = 2;
  // Compute before each call, as in a training step (seconds, drawn
  // between the two); both 0: calls back to back with the cores kept
  // awake.
  double between_min_seconds = 1e-4;
  double between_max_seconds = 1e-3;
  // The same with two groups of ranks on the same cores calling at once
  // (the link's shared_cores costs); both 0: not measured.
  double shared_between_min_seconds = 1e-5;
  double shared_between_max_seconds = 2e-5;
  // Longer mean gaps of compute (seconds, increasing, each above the mean
  // of the step regime's) for the link's after_idle; empty: not measured.
  std::vector<double> idle_gaps;
  // Timed rounds of every call where compute comes between calls.
  int rounds = 101;
  // The largest message; sizes go from 4 KiB by x4.
  int64_t max_bytes = 16 << 20;
  // All-reduces of this many bytes for the link's sustained rate; 0: none.
  int64_t long_bytes = 16 << 20;
  // Seconds the interference measurement computes alone.
  double interference_seconds = 1.0;
  // Seconds of all-reduces back to back per size for the call's CPU; 0:
  // not measured.
  double call_cpu_seconds = 0.5;
  // All-reduces of core_wait_bytes beside each length of compute burst
  // for the cluster's core_wait; 0: not measured.
  int core_wait_calls = 0;
  int64_t core_wait_bytes = 16 << 10;
  // The report (fits, residuals, what was recorded); null: none. Progress
  // lines go to stderr.
  FILE* out = stdout;
};

// The message sizes timed: from 4 KiB by x4 up to `max_bytes` (none below
// 4 KiB).
inline std::vector<int64_t> MessageSizes(int64_t max_bytes) {
  std::vector<int64_t> sizes;
  for (int64_t b = 4 << 10; b <= max_bytes; b *= 4) sizes.push_back(b);
  return sizes;
}

}  // namespace loom

#endif  // LOOM_PROFILING_LINK_PROFILE_OPTIONS_H_
