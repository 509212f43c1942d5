#include "scheduler/trace.h"

#include <map>
#include <iterator>
#include <set>

#include <nlohmann/json.hpp>

#include "framework/file_util.h"

namespace loom {
namespace {

using nlohmann::json;

constexpr const char* kStreamOrder[] = {
    stream::kCalc,          stream::kMp,          stream::kDp,          stream::kSharding,
    stream::kP2pSend,       stream::kP2pRecv,     stream::kP2pSendUp,   stream::kP2pRecvUp,
    stream::kP2pSendGrad,   stream::kP2pRecvGrad, stream::kP2pSendGradUp,
    stream::kP2pRecvGradUp};
constexpr int kNumKnownStreams = static_cast<int>(std::size(kStreamOrder));

StatusOr<InstructionKind> ParseKind(const std::string& name) {
  for (InstructionKind k :
       {InstructionKind::kCompute, InstructionKind::kCollective, InstructionKind::kSend,
        InstructionKind::kRecv, InstructionKind::kNoOp}) {
    if (name == InstructionKindName(k)) return k;
  }
  return InvalidArgument("unknown instruction kind '", name, "'");
}

}  // namespace

const char* CommCategoryName(CommCategory c) {
  switch (c) {
    case CommCategory::kNone:
      return "";
    case CommCategory::kMp:
      return "mp";
    case CommCategory::kDp:
      return "dp";
    case CommCategory::kP2p:
      return "p2p";
    case CommCategory::kSharding:
      return "sharding";
  }
  return "";
}

CommCategory CommCategoryOf(const RankGraph& graph, const Instruction& ins) {
  if (!ins.communicates()) return CommCategory::kNone;
  switch (ins.ring) {
    case kMpRing:
      return CommCategory::kMp;
    case kPpRing:
    case kPpGradRing:
      return CommCategory::kP2p;
    case kDpRing:
    case kDpReplicaRing:
      return graph.StreamName(ins) == stream::kSharding ? CommCategory::kSharding
                                                        : CommCategory::kDp;
    case kShardingRing:
      return CommCategory::kSharding;
    case kSharedParamRing:
      return CommCategory::kDp;
  }
  return CommCategory::kDp;
}

TraceEvent TraceEventOf(const RankGraph& graph, const Instruction& ins,
                        int64_t start_ns, int64_t end_ns) {
  TraceEvent e;
  e.rank = graph.rank;
  e.stream = graph.StreamName(ins);
  e.op = ins.op_type;
  e.job = ins.job;
  e.kind = ins.kind;
  e.comm = CommCategoryOf(graph, ins);
  e.instruction = ins.id;
  e.start_ns = start_ns;
  e.end_ns = end_ns;
  return e;
}

int StreamOrder(const std::string& stream) {
  for (int i = 0; i < kNumKnownStreams; ++i) {
    if (stream == kStreamOrder[i]) return i;
  }
  return kNumKnownStreams;
}

std::string ChromeTraceJson(const std::vector<TraceEvent>& events,
                            const std::vector<TraceCounter>& counters) {
  // Lane ids: known streams first in their order, others after by name.
  std::map<std::pair<int, std::string>, int> lanes;
  for (const TraceEvent& e : events) lanes.emplace(std::make_pair(StreamOrder(e.stream), e.stream), 0);
  int next = 0;
  std::map<std::string, int> tid;
  for (auto& [key, id] : lanes) tid[key.second] = id = next++;

  json out;
  out["displayTimeUnit"] = "ms";
  json& list = out["traceEvents"] = json::array();
  std::set<std::pair<int, std::string>> named;
  std::set<int> ranks;
  for (const TraceEvent& e : events) {
    list.push_back({{"name", e.op},
                    {"cat", JobTypeName(e.job.type)},
                    {"ph", "X"},
                    {"pid", e.rank},
                    {"tid", tid[e.stream]},
                    {"ts", e.start_ns / 1000.0},
                    {"dur", (e.end_ns - e.start_ns) / 1000.0},
                    {"args",
                     {{"job", JobToString(e.job, true)},
                      {"micro_batch", e.job.micro_batch},
                      {"chunk", e.job.chunk},
                      {"kind", InstructionKindName(e.kind)},
                      {"instruction", e.instruction},
                      {"comm", CommCategoryName(e.comm)},
                      {"stream", e.stream}}}});
    // A call that waited for its other parties: when it arrived.
    if (e.arrived_ns >= 0 && e.arrived_ns < e.start_ns) {
      list.back()["args"]["arrived_us"] = e.arrived_ns / 1000.0;
    }
    ranks.insert(e.rank);
    named.emplace(e.rank, e.stream);
  }
  for (const TraceCounter& c : counters) {
    for (const TraceCounter::Sample& v : c.samples) {
      list.push_back({{"name", c.name},
                      {"ph", "C"},
                      {"pid", c.rank},
                      {"ts", v.time_ns / 1000.0},
                      {"args", {{"value", v.value}}}});
    }
    ranks.insert(c.rank);
  }
  for (int r : ranks) {
    list.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", r},
                    {"args", {{"name", StrCat("rank ", r)}}}});
  }
  for (const auto& [r, s] : named) {
    list.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", r}, {"tid", tid[s]},
                    {"args", {{"name", s}}}});
  }
  return out.dump();
}

Status WriteChromeTrace(const std::vector<TraceEvent>& events, const std::string& path,
                        const std::vector<TraceCounter>& counters) {
  return WriteFileAtomically(path, ChromeTraceJson(events, counters));
}

StatusOr<std::vector<TraceEvent>> ParseChromeTrace(const std::string& text) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument("not JSON");
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array()) {
    return InvalidArgument("no traceEvents array");
  }
  std::vector<TraceEvent> events;
  int index = 0;
  for (const json& e : doc["traceEvents"]) {
    const int i = index++;
    if (!e.is_object() || e.value("ph", "") != "X") continue;
    auto bad = [&](const char* field) {
      return InvalidArgument("traceEvents[", i, "]: missing or malformed '", field, "'");
    };
    if (!e.contains("pid") || !e["pid"].is_number_integer()) return bad("pid");
    if (!e.contains("ts") || !e["ts"].is_number()) return bad("ts");
    if (!e.contains("dur") || !e["dur"].is_number()) return bad("dur");
    if (!e.contains("name") || !e["name"].is_string()) return bad("name");
    if (!e.contains("args") || !e["args"].is_object()) return bad("args");
    const json& a = e["args"];
    if (!a.contains("stream") || !a["stream"].is_string()) return bad("args.stream");
    if (!a.contains("job") || !a["job"].is_string()) return bad("args.job");
    TraceEvent t;
    t.rank = e["pid"].get<int>();
    t.op = e["name"].get<std::string>();
    t.stream = a["stream"].get<std::string>();
    auto job = ParseJob(a["job"].get<std::string>());
    if (!job.ok()) return job.status().WithContext(StrCat("traceEvents[", i, "]: args.job"));
    t.job = *job;
    if (a.contains("kind")) {
      if (!a["kind"].is_string()) return bad("args.kind");
      auto kind = ParseKind(a["kind"].get<std::string>());
      if (!kind.ok()) return kind.status().WithContext(StrCat("traceEvents[", i, "]"));
      t.kind = *kind;
    }
    if (a.contains("comm")) {
      if (!a["comm"].is_string()) return bad("args.comm");
      const std::string c = a["comm"].get<std::string>();
      for (int k = 0; k < kNumCommCategories; ++k) {
        if (c == CommCategoryName(static_cast<CommCategory>(k))) t.comm = static_cast<CommCategory>(k);
      }
      if (!c.empty() && t.comm == CommCategory::kNone) return bad("args.comm");
    }
    if (a.contains("instruction")) {
      if (!a["instruction"].is_number_integer()) return bad("args.instruction");
      t.instruction = a["instruction"].get<int>();
    }
    t.start_ns = static_cast<int64_t>(e["ts"].get<double>() * 1000.0 + 0.5);
    t.end_ns = t.start_ns + static_cast<int64_t>(e["dur"].get<double>() * 1000.0 + 0.5);
    if (a.contains("arrived_us")) {
      if (!a["arrived_us"].is_number()) return bad("args.arrived_us");
      t.arrived_ns = static_cast<int64_t>(a["arrived_us"].get<double>() * 1000.0 + 0.5);
    }
    events.push_back(std::move(t));
  }
  return events;
}

StatusOr<std::vector<TraceEvent>> ReadChromeTrace(const std::string& path) {
  LOOM_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  auto events = ParseChromeTrace(text);
  if (!events.ok()) return events.status().WithContext(path);
  return events;
}

}  // namespace loom
