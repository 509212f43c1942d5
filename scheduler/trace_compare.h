// Where a simulated timeline and a measured one differ: total time by op
// type and by stream, one table each, largest differences first. The two
// traces come from the same plan (`loom run --trace`, `loom simulate
// --trace`), so their instructions correspond one to one.
//
// Like with like: the executor's trace starts an instruction when its
// stream reaches it, so a measured collective or transfer includes its wait
// for the other parties, while the simulator starts it at the rendezvous
// (its wait shows as idle stream time). StartAtRendezvous moves each
// measured communication's start to its last party's arrival, so that both
// traces count the same span; the wait it removes is reported apart.
#ifndef LOOM_SCHEDULER_TRACE_COMPARE_H_
#define LOOM_SCHEDULER_TRACE_COMPARE_H_

#include <array>
#include <string>
#include <vector>

#include "scheduler/execution_graph.h"
#include "scheduler/trace.h"

namespace loom {

// `measured` (one step of every rank of `graph`'s plan) with each
// communicating instruction starting when the last of its parties arrived.
// `waits`, if given, receives each event's removed wait (ns), by index.
// Errors name an event whose instruction the graph does not have.
StatusOr<std::vector<TraceEvent>> StartAtRendezvous(const std::vector<TraceEvent>& measured,
                                                    const ExecutionGraph& graph,
                                                    std::vector<int64_t>* waits = nullptr);

struct TraceDifference {
  std::string key;  // an op type, a stream name, or an instruction
  int64_t measured_count = 0;
  int64_t simulated_count = 0;
  double measured_s = 0;   // summed over ranks
  double simulated_s = 0;
  // Waits for the other parties, taken out of measured_s (communication,
  // when the comparison aligned the measured trace).
  double measured_wait_s = 0;
  double difference_s() const { return simulated_s - measured_s; }
};

struct TraceComparison {
  double measured_step_s = 0;
  double simulated_step_s = 0;
  // The step's calc bubble and exposed communication by category (mean
  // over ranks), as AnalyzeTrace accounts them on each side.
  double measured_bubble = 0, simulated_bubble = 0;
  std::array<double, kNumCommCategories> measured_exposed_s{}, simulated_exposed_s{};
  bool aligned = false;  // measured communication starts at the rendezvous
  std::vector<TraceDifference> by_op;      // largest |difference| first
  std::vector<TraceDifference> by_stream;  // same
  // Single instructions (rank, job, op), when the events carry their ids.
  std::vector<TraceDifference> by_instruction;
};

// Compares the traces as they are.
TraceComparison CompareTraces(const std::vector<TraceEvent>& measured,
                              const std::vector<TraceEvent>& simulated);
// Compares them like with like: the measured trace is aligned to `graph`'s
// rendezvous first (StartAtRendezvous).
StatusOr<TraceComparison> CompareTraces(const std::vector<TraceEvent>& measured,
                                        const std::vector<TraceEvent>& simulated,
                                        const ExecutionGraph& graph);

// The tables as text, at most `rows` rows each.
std::string TraceComparisonToString(const TraceComparison& c, int rows = 12);

}  // namespace loom

#endif  // LOOM_SCHEDULER_TRACE_COMPARE_H_
