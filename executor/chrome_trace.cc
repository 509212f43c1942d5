#include "executor/chrome_trace.h"

#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace loom {
namespace {

// Stream threads in a fixed order, so every rank's lanes line up.
int StreamOrder(const std::string& stream) {
  static const char* const kOrder[] = {stream::kCalc, stream::kMp, stream::kDp,
                                       stream::kSharding, stream::kP2pSend,
                                       stream::kP2pRecv};
  for (int i = 0; i < 6; ++i) {
    if (stream == kOrder[i]) return i;
  }
  return 6;
}

}  // namespace

std::string ChromeTraceJson(const std::vector<TraceEvent>& events) {
  std::ostringstream os;
  os << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  std::set<std::pair<int, std::string>> lanes;
  bool first = true;
  for (const TraceEvent& e : events) {
    lanes.insert({e.rank, e.stream});
    if (!first) os << ",";
    first = false;
    os << "{\"name\":\"" << e.op << "\",\"cat\":\"" << JobTypeName(e.job.type)
       << "\",\"ph\":\"X\",\"pid\":" << e.rank
       << ",\"tid\":" << StreamOrder(e.stream) << ",\"ts\":" << e.start_ns / 1000.0
       << ",\"dur\":" << (e.end_ns - e.start_ns) / 1000.0
       << ",\"args\":{\"job\":\"" << JobToString(e.job, true)
       << "\",\"micro_batch\":" << e.job.micro_batch << ",\"chunk\":" << e.job.chunk
       << "}}";
  }
  // Names for the processes (ranks) and threads (streams).
  std::set<int> ranks;
  for (const auto& [rank, stream] : lanes) {
    if (ranks.insert(rank).second) {
      os << (first ? "" : ",") << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":"
         << rank << ",\"args\":{\"name\":\"rank " << rank << "\"}}";
      first = false;
    }
    os << ",{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << rank
       << ",\"tid\":" << StreamOrder(stream) << ",\"args\":{\"name\":\"" << stream
       << "\"}}";
  }
  os << "]}";
  return os.str();
}

Status WriteChromeTrace(const std::vector<TraceEvent>& events,
                        const std::string& path) {
  std::ofstream out(path);
  if (!out) return NotFound(path, ": cannot open for writing");
  out << ChromeTraceJson(events);
  if (!out) return DataLoss(path, ": write failed");
  return Status::OK();
}

}  // namespace loom
