#include "scheduler/trace_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <unordered_map>

#include "scheduler/timeline_metrics.h"

namespace loom {
namespace {

bool Communicates(InstructionKind kind) {
  return kind == InstructionKind::kCollective || kind == InstructionKind::kSend ||
         kind == InstructionKind::kRecv;
}

// The rank and instruction id name an instruction; the job is for the
// reader, by micro-batch only: a trace file keeps a part's number but not
// its op range, so "B3#2" read back is not the simulated part it was.
std::string InstructionKey(const TraceEvent& e) {
  const Job job{e.job.type, e.job.micro_batch, e.job.chunk};
  return StrCat("r", e.rank, " ", JobToString(job, job.chunk > 0), " #", e.instruction, " ", e.op);
}

template <typename KeyFn>
std::vector<TraceDifference> Table(const std::vector<TraceEvent>& measured,
                                   const std::vector<int64_t>& waits,
                                   const std::vector<TraceEvent>& simulated, KeyFn key) {
  std::map<std::string, TraceDifference> rows;
  for (size_t i = 0; i < measured.size(); ++i) {
    const TraceEvent& e = measured[i];
    TraceDifference& d = rows[key(e)];
    ++d.measured_count;
    d.measured_s += (e.end_ns - e.start_ns) * 1e-9;
    if (!waits.empty()) d.measured_wait_s += waits[i] * 1e-9;
  }
  for (const TraceEvent& e : simulated) {
    TraceDifference& d = rows[key(e)];
    ++d.simulated_count;
    d.simulated_s += (e.end_ns - e.start_ns) * 1e-9;
  }
  std::vector<TraceDifference> out;
  for (auto& [k, d] : rows) {
    d.key = k;
    out.push_back(d);
  }
  std::stable_sort(out.begin(), out.end(), [](const TraceDifference& a, const TraceDifference& b) {
    return std::fabs(a.difference_s()) > std::fabs(b.difference_s());
  });
  return out;
}

TraceComparison Compare(const std::vector<TraceEvent>& measured,
                        const std::vector<int64_t>& waits,
                        const std::vector<TraceEvent>& simulated) {
  TraceComparison c;
  const TimelineMetrics m = AnalyzeTrace(measured);
  const TimelineMetrics s = AnalyzeTrace(simulated);
  c.measured_step_s = m.step_time_s;
  c.simulated_step_s = s.step_time_s;
  c.measured_bubble = m.bubble_fraction;
  c.simulated_bubble = s.bubble_fraction;
  c.measured_exposed_s = m.exposed_comm_s;
  c.simulated_exposed_s = s.exposed_comm_s;
  c.by_op = Table(measured, waits, simulated, [](const TraceEvent& e) { return e.op; });
  c.by_stream = Table(measured, waits, simulated, [](const TraceEvent& e) { return e.stream; });
  const auto has_ids = [](const std::vector<TraceEvent>& t) {
    return std::all_of(t.begin(), t.end(), [](const TraceEvent& e) { return e.instruction >= 0; });
  };
  if (has_ids(measured) && has_ids(simulated)) {
    c.by_instruction = Table(measured, waits, simulated, InstructionKey);
  }
  return c;
}

std::string Print(const char* title, const std::vector<TraceDifference>& rows, int max_rows,
                  bool waits) {
  std::string out = StrCat(title, "\n");
  char line[320];
  std::snprintf(line, sizeof(line), "  %-40s %8s %12s %12s %12s %8s%s\n", "", "count",
                "measured ms", "simulated ms", "diff ms", "diff %",
                waits ? "  wait ms (out of measured)" : "");
  out += line;
  int n = 0;
  for (const TraceDifference& d : rows) {
    if (n++ >= max_rows) break;
    const double pct = d.measured_s > 0 ? 100.0 * d.difference_s() / d.measured_s : 0.0;
    const std::string count = d.measured_count == d.simulated_count
                                  ? StrCat(d.measured_count)
                                  : StrCat(d.measured_count, "/", d.simulated_count);
    char wait[32] = "";
    if (waits && d.measured_wait_s > 0) {
      std::snprintf(wait, sizeof(wait), "  %12.3f", d.measured_wait_s * 1e3);
    }
    std::snprintf(line, sizeof(line), "  %-40s %8s %12.3f %12.3f %+12.3f %+7.1f%%%s\n",
                  d.key.substr(0, 40).c_str(), count.c_str(), d.measured_s * 1e3,
                  d.simulated_s * 1e3, d.difference_s() * 1e3, pct, wait);
    out += line;
  }
  return out;
}

}  // namespace

StatusOr<std::vector<TraceEvent>> StartAtRendezvous(const std::vector<TraceEvent>& measured,
                                                    const ExecutionGraph& graph,
                                                    std::vector<int64_t>* waits) {
  std::unordered_map<int, const RankGraph*> by_rank;
  for (const RankGraph& g : graph.ranks) by_rank[g.rank] = &g;
  // The call each communicating event is part of, and each call's last
  // arrival.
  std::vector<RendezvousId> call(measured.size());
  std::map<RendezvousId, int64_t> last;
  for (size_t i = 0; i < measured.size(); ++i) {
    const TraceEvent& e = measured[i];
    if (!Communicates(e.kind)) continue;
    auto it = by_rank.find(e.rank);
    const RankGraph* g = it == by_rank.end() ? nullptr : it->second;
    if (g == nullptr || e.instruction < 0 ||
        e.instruction >= static_cast<int>(g->instructions().size()) ||
        g->instructions()[e.instruction].op_type != e.op) {
      return InvalidArgument("trace event ", i, " (rank ", e.rank, ", instruction ",
                             e.instruction, ", ", e.op,
                             ") is not an instruction of the plan's graph");
    }
    call[i] = RendezvousOf(*g, g->instructions()[e.instruction]);
    auto [at, fresh] = last.emplace(call[i], e.start_ns);
    if (!fresh) at->second = std::max(at->second, e.start_ns);
  }
  std::vector<TraceEvent> out = measured;
  if (waits != nullptr) waits->assign(out.size(), 0);
  for (size_t i = 0; i < out.size(); ++i) {
    TraceEvent& e = out[i];
    if (!Communicates(e.kind)) continue;
    const int64_t start = std::min(std::max(e.start_ns, last.at(call[i])), e.end_ns);
    if (waits != nullptr) (*waits)[i] = start - e.start_ns;
    e.start_ns = start;
  }
  return out;
}

TraceComparison CompareTraces(const std::vector<TraceEvent>& measured,
                              const std::vector<TraceEvent>& simulated) {
  return Compare(measured, {}, simulated);
}

StatusOr<TraceComparison> CompareTraces(const std::vector<TraceEvent>& measured,
                                        const std::vector<TraceEvent>& simulated,
                                        const ExecutionGraph& graph) {
  std::vector<int64_t> waits;
  LOOM_ASSIGN_OR_RETURN(std::vector<TraceEvent> aligned,
                        StartAtRendezvous(measured, graph, &waits));
  TraceComparison c = Compare(aligned, waits, simulated);
  c.aligned = true;
  return c;
}

std::string TraceComparisonToString(const TraceComparison& c, int rows) {
  const double err = c.measured_step_s > 0
                         ? 100.0 * (c.simulated_step_s - c.measured_step_s) / c.measured_step_s
                         : 0.0;
  char head[200];
  std::snprintf(head, sizeof(head), "step: measured %.3f ms, simulated %.3f ms (%+.1f%%)%s\n",
                c.measured_step_s * 1e3, c.simulated_step_s * 1e3, err,
                c.aligned ? "; measured communication from its last party's arrival" : "");
  std::string out = head;
  std::snprintf(head, sizeof(head), "calc bubble: measured %.1f%%, simulated %.1f%%\n",
                100 * c.measured_bubble, 100 * c.simulated_bubble);
  out += head;
  out += "exposed comm (ms, mean over ranks):";
  for (int k = 0; k < kNumCommCategories; ++k) {
    std::snprintf(head, sizeof(head), " %s measured %.3f simulated %.3f%s",
                  CommCategoryName(static_cast<CommCategory>(k)), c.measured_exposed_s[k] * 1e3,
                  c.simulated_exposed_s[k] * 1e3, k + 1 < kNumCommCategories ? ";" : "\n");
    out += head;
  }
  out += Print("by op type (time summed over ranks):", c.by_op, rows, c.aligned) +
                    Print("by stream:", c.by_stream, rows, c.aligned);
  if (!c.by_instruction.empty()) {
    out += Print("by instruction:", c.by_instruction, rows, c.aligned);
  }
  return out;
}

}  // namespace loom
