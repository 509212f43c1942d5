#include "scheduler/trace_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "scheduler/timeline_metrics.h"

namespace loom {
namespace {

std::vector<TraceDifference> Table(const std::vector<TraceEvent>& measured,
                                   const std::vector<TraceEvent>& simulated,
                                   std::string TraceEvent::*key) {
  std::map<std::string, TraceDifference> rows;
  for (const TraceEvent& e : measured) {
    TraceDifference& d = rows[e.*key];
    ++d.measured_count;
    d.measured_s += (e.end_ns - e.start_ns) * 1e-9;
  }
  for (const TraceEvent& e : simulated) {
    TraceDifference& d = rows[e.*key];
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

std::string Print(const char* title, const std::vector<TraceDifference>& rows, int max_rows) {
  std::string out = StrCat(title, "\n");
  char line[256];
  std::snprintf(line, sizeof(line), "  %-36s %8s %12s %12s %12s %8s\n", "", "count",
                "measured ms", "simulated ms", "diff ms", "diff %");
  out += line;
  int n = 0;
  for (const TraceDifference& d : rows) {
    if (n++ >= max_rows) break;
    const double pct = d.measured_s > 0 ? 100.0 * d.difference_s() / d.measured_s : 0.0;
    const std::string count = d.measured_count == d.simulated_count
                                  ? StrCat(d.measured_count)
                                  : StrCat(d.measured_count, "/", d.simulated_count);
    std::snprintf(line, sizeof(line), "  %-36s %8s %12.3f %12.3f %+12.3f %+7.1f%%\n",
                  d.key.substr(0, 36).c_str(), count.c_str(), d.measured_s * 1e3,
                  d.simulated_s * 1e3, d.difference_s() * 1e3, pct);
    out += line;
  }
  return out;
}

}  // namespace

TraceComparison CompareTraces(const std::vector<TraceEvent>& measured,
                              const std::vector<TraceEvent>& simulated) {
  TraceComparison c;
  c.measured_step_s = AnalyzeTrace(measured).step_time_s;
  c.simulated_step_s = AnalyzeTrace(simulated).step_time_s;
  c.by_op = Table(measured, simulated, &TraceEvent::op);
  c.by_stream = Table(measured, simulated, &TraceEvent::stream);
  return c;
}

std::string TraceComparisonToString(const TraceComparison& c, int rows) {
  const double err = c.measured_step_s > 0
                         ? 100.0 * (c.simulated_step_s - c.measured_step_s) / c.measured_step_s
                         : 0.0;
  char head[160];
  std::snprintf(head, sizeof(head), "step: measured %.3f ms, simulated %.3f ms (%+.1f%%)\n",
                c.measured_step_s * 1e3, c.simulated_step_s * 1e3, err);
  return head + Print("by op type (time summed over ranks):", c.by_op, rows) +
         Print("by stream:", c.by_stream, rows);
}

}  // namespace loom
