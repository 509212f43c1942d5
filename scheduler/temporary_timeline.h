// The temporaries one rank holds over a step, replayed from a trace of its
// instructions through the allocations and frees lowering counts
// (RankGraphBody::touches): an instruction's first writes allocate when it
// arrives (TraceEvent::arrived_ns: a call's party before the others join),
// and a temporary is freed when the last instruction touching it ends. The
// simulator and the executor both follow that rule, so the same replay
// explains a simulated peak and a measured one, and where the streams'
// order made them differ.
#ifndef LOOM_SCHEDULER_TEMPORARY_TIMELINE_H_
#define LOOM_SCHEDULER_TEMPORARY_TIMELINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "framework/status.h"
#include "scheduler/execution_graph.h"
#include "scheduler/trace.h"

namespace loom {

struct TemporaryTimeline {
  int rank = 0;
  struct Point {
    int64_t time_ns = 0;
    int64_t bytes = 0;  // held from here on
  };
  std::vector<Point> points;  // one where the bytes held change, in time order
  int64_t peak_bytes = 0;
  int peak_instruction = -1;      // whose allocations first reached the peak
  std::vector<int> live_at_peak;  // RankGraphBody::temporaries ids, ascending
};

// Replays the events of `graph.rank` in `events` (others are skipped): one
// step, each of the rank's instructions at most once. Fed data (the
// micro-batches' tokens) is held from the start. `kept` names vars the
// executor keeps from step to step (RankExecutorOptions::keep): held
// throughout, as after an earlier step; the simulator keeps none. At one
// instant, the ends of instructions come first. An error names the event:
// an instruction unknown to the graph, or one run twice.
StatusOr<TemporaryTimeline> ReplayTemporaries(const RankGraph& graph,
                                              const std::vector<TraceEvent>& events,
                                              const std::vector<std::string>& kept = {});

// What a timeline's peak holds, in one line: "17.67 MB at matmul_grad
// (job B0) on calc: dp.bucket2@GRAD 4.72 MB, ..., 10 others 3.50 MB", the
// `largest` temporaries by name (with their micro-batch where the rank
// runs more than one).
std::string DescribePeak(const RankGraph& graph, const TemporaryTimeline& timeline,
                         int largest = 3);

// The timelines of every rank of `graph` with events in `events`, in the
// graph's order.
StatusOr<std::vector<TemporaryTimeline>> ReplayTracedRanks(
    const ExecutionGraph& graph, const std::vector<TraceEvent>& events,
    const std::vector<std::string>& kept = {});

// Timelines as counter tracks of a Chrome trace ("temporaries (MB)"), what
// `loom run --trace` and `loom simulate --trace` write beside the events.
std::vector<TraceCounter> TemporaryCounters(const std::vector<TemporaryTimeline>& timelines);

}  // namespace loom

#endif  // LOOM_SCHEDULER_TEMPORARY_TIMELINE_H_
