// Where a simulated timeline and a measured one differ: total time by op
// type and by stream, one table each, largest differences first. The two
// traces come from the same plan (`loom run --trace`, `loom simulate
// --trace`), so their instructions correspond one to one.
#ifndef LOOM_SCHEDULER_TRACE_COMPARE_H_
#define LOOM_SCHEDULER_TRACE_COMPARE_H_

#include <string>
#include <vector>

#include "scheduler/trace.h"

namespace loom {

struct TraceDifference {
  std::string key;  // an op type, or a stream name
  int64_t measured_count = 0;
  int64_t simulated_count = 0;
  double measured_s = 0;   // summed over ranks
  double simulated_s = 0;
  double difference_s() const { return simulated_s - measured_s; }
};

struct TraceComparison {
  double measured_step_s = 0;
  double simulated_step_s = 0;
  std::vector<TraceDifference> by_op;      // largest |difference| first
  std::vector<TraceDifference> by_stream;  // same
};

TraceComparison CompareTraces(const std::vector<TraceEvent>& measured,
                              const std::vector<TraceEvent>& simulated);

// The two tables as text, at most `rows` rows each.
std::string TraceComparisonToString(const TraceComparison& c, int rows = 12);

}  // namespace loom

#endif  // LOOM_SCHEDULER_TRACE_COMPARE_H_
