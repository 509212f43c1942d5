#include "scheduler/timeline_metrics.h"

#include <algorithm>
#include <limits>

namespace loom {

void RankAccounting::Extend(std::vector<TimeInterval>& list, double from, double to) {
  if (!list.empty() && list.back().end == from) {
    list.back().end = to;
  } else {
    list.push_back({from, to});
  }
}

void RankAccounting::Change(double t, InstructionKind kind, bool on_calc, CommCategory comm,
                            int delta) {
  const double dt = t - last_;
  if (dt > 0) {
    if (calc_computing_ > 0) {
      calc_compute_s_ += dt;
      if (intervals_) Extend(calc_busy_, last_, t);
    }
    if (computing_ == 0) {
      for (int c = 0; c < kNumCommCategories; ++c) {
        if (communicating_[c] == 0) continue;
        exposed_s_[c] += dt;
        if (intervals_) Extend(exposed_[c], last_, t);
      }
    }
  }
  last_ = std::max(last_, t);
  if (kind == InstructionKind::kCompute) {
    computing_ += delta;
    if (on_calc) calc_computing_ += delta;
  } else if (comm != CommCategory::kNone) {
    communicating_[static_cast<int>(comm)] += delta;
  }
}

std::vector<TimeInterval> RankAccounting::CalcIdle(double step_end) const {
  std::vector<TimeInterval> idle;
  double at = 0;
  for (const TimeInterval& busy : calc_busy_) {
    if (busy.start > at) idle.push_back({at, busy.start});
    at = std::max(at, busy.end);
  }
  if (step_end > at) idle.push_back({at, step_end});
  return idle;
}

TimelineMetrics AnalyzeTrace(const std::vector<TraceEvent>& events, bool intervals) {
  TimelineMetrics out;
  if (events.empty()) return out;
  int64_t epoch = std::numeric_limits<int64_t>::max();
  for (const TraceEvent& e : events) epoch = std::min(epoch, e.start_ns);
  auto seconds = [&](int64_t ns) { return static_cast<double>(ns - epoch) * 1e-9; };

  // Per rank: change points in time order, ends before starts at a tie so
  // that back-to-back instructions never overlap.
  struct Point {
    double t;
    int delta;
    const TraceEvent* e;
  };
  std::map<int, std::vector<Point>> points;
  for (const TraceEvent& e : events) {
    points[e.rank].push_back({seconds(e.start_ns), +1, &e});
    points[e.rank].push_back({seconds(e.end_ns), -1, &e});
  }
  for (auto& [rank, list] : points) {
    std::stable_sort(list.begin(), list.end(), [](const Point& a, const Point& b) {
      return a.t != b.t ? a.t < b.t : a.delta < b.delta;
    });
    RankTimelineMetrics m;
    m.rank = rank;
    RankAccounting acc(intervals);
    for (const Point& p : list) {
      const bool calc = p.e->stream == stream::kCalc;
      if (p.delta > 0) {
        acc.Start(p.t, p.e->kind, calc, p.e->comm);
      } else {
        acc.End(p.t, p.e->kind, calc, p.e->comm);
      }
      m.step_time_s = std::max(m.step_time_s, p.t);
    }
    m.calc_compute_s = acc.calc_compute_s();
    m.exposed_comm_s = acc.exposed_comm_s();
    if (intervals) {
      m.exposed = acc.exposed();
      m.calc_idle = acc.CalcIdle(m.step_time_s);
    }
    out.step_time_s = std::max(out.step_time_s, m.step_time_s);
    out.ranks.push_back(std::move(m));
  }
  const double n = static_cast<double>(out.ranks.size());
  for (RankTimelineMetrics& m : out.ranks) {
    m.bubble_fraction = out.step_time_s > 0 ? 1 - m.calc_compute_s / out.step_time_s : 0;
    if (intervals) {
      // Idle until the step's end, not only the rank's.
      if (m.step_time_s < out.step_time_s) m.calc_idle.push_back({m.step_time_s, out.step_time_s});
    }
    out.bubble_fraction += m.bubble_fraction / n;
    for (int c = 0; c < kNumCommCategories; ++c) out.exposed_comm_s[c] += m.exposed_comm_s[c] / n;
  }
  return out;
}

}  // namespace loom
