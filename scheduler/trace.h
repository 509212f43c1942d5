// The trace format the executor and the simulator both write: one event per
// instruction run, with its rank, stream, job, kind and times. One format
// both ways, so that one viewer and one metrics pass serve a measured and a
// simulated step, and the two can be compared op by op.
//
// On disk it is Chrome trace JSON (the "traceEvents" format Perfetto and
// chrome://tracing open): one process per rank, one thread per stream, one
// complete ("X") event per instruction, whose args carry the job and kind so
// that the file reads back into the same events.
#ifndef LOOM_SCHEDULER_TRACE_H_
#define LOOM_SCHEDULER_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "scheduler/execution_graph.h"

namespace loom {

// Kinds of communication the metrics separate, by the ring an instruction
// communicates on; on the dp ring, the sharding stream's collectives (ZeRO's
// reduce-scatters and gathers) are sharding, the rest dp.
enum class CommCategory : int8_t { kNone = -1, kMp = 0, kDp, kP2p, kSharding };
inline constexpr int kNumCommCategories = 4;
// "mp", "dp", "p2p", "sharding"; "" for kNone.
const char* CommCategoryName(CommCategory c);
// kNone for an instruction that does not communicate.
CommCategory CommCategoryOf(const RankGraph& graph, const Instruction& ins);

struct TraceEvent {
  int rank = 0;
  std::string stream;
  std::string op;  // op type
  Job job;
  InstructionKind kind = InstructionKind::kCompute;
  CommCategory comm = CommCategory::kNone;
  int instruction = -1;  // its id in the rank's graph; -1 when unknown
  // Measured: the host's monotonic clock (CLOCK_MONOTONIC, shared by the
  // ranks of a host); simulated: from the step's start. Readers take the
  // earliest start as the origin.
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  // When its stream reached it with its dependencies done, and it allocated
  // its outputs; a call's party then waits for the others until start_ns.
  // -1: at start_ns (the executor stamps its start on arrival).
  int64_t arrived_ns = -1;
};

TraceEvent TraceEventOf(const RankGraph& graph, const Instruction& ins,
                        int64_t start_ns, int64_t end_ns);

// Stream lanes in a fixed order (calc, mp, dp, sharding, p2p_send,
// p2p_recv, the V's p2p streams (framework/types.h), then any other by
// name), so that every rank's lanes line up.
int StreamOrder(const std::string& stream);

// A value a rank holds over time, drawn as a counter track ("C" events)
// above its streams; reading a trace back skips it.
struct TraceCounter {
  int rank = 0;
  std::string name;  // with its unit: "temporaries (MB)"
  struct Sample {
    int64_t time_ns = 0;  // the same clock as the events'
    double value = 0;
  };
  std::vector<Sample> samples;
};

std::string ChromeTraceJson(const std::vector<TraceEvent>& events,
                            const std::vector<TraceCounter>& counters = {});
// Written atomically.
Status WriteChromeTrace(const std::vector<TraceEvent>& events, const std::string& path,
                        const std::vector<TraceCounter>& counters = {});
// Reads what ChromeTraceJson writes; errors name the event at fault.
StatusOr<std::vector<TraceEvent>> ParseChromeTrace(const std::string& json);
StatusOr<std::vector<TraceEvent>> ReadChromeTrace(const std::string& path);

}  // namespace loom

#endif  // LOOM_SCHEDULER_TRACE_H_
