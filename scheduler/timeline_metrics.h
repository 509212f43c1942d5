// What a timeline says about one step, computed one way for a simulated
// and a measured run: step time, calc-stream bubbles and exposed
// communication per kind. The simulator feeds a RankAccounting as its
// events happen; AnalyzeTrace feeds the same class from a trace, so the two
// cannot define the metrics differently.
#ifndef LOOM_SCHEDULER_TIMELINE_METRICS_H_
#define LOOM_SCHEDULER_TIMELINE_METRICS_H_

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "scheduler/trace.h"

namespace loom {

struct TimeInterval {
  double start = 0;  // seconds
  double end = 0;
};

// One rank's accounting. Changes arrive in nondecreasing time: an
// instruction starts or ends. Definitions:
//   calc compute   time in which a compute instruction runs on the calc
//                  stream; the calc stream's bubbles are the rest of the
//                  step;
//   exposed comm   per kind, time in which an instruction of that kind runs
//                  and no compute instruction runs on the rank (on any
//                  stream): communication nothing hides.
class RankAccounting {
 public:
  // With `intervals`, exposed-communication and calc-idle intervals are
  // kept too (for timelines); without, only the sums.
  explicit RankAccounting(bool intervals = false) : intervals_(intervals) {}

  // An instruction of `kind`, on the calc stream or not, communicating as
  // `comm`, starts or ends at t.
  void Start(double t, InstructionKind kind, bool on_calc, CommCategory comm) {
    Change(t, kind, on_calc, comm, +1);
  }
  void End(double t, InstructionKind kind, bool on_calc, CommCategory comm) {
    Change(t, kind, on_calc, comm, -1);
  }

  double calc_compute_s() const { return calc_compute_s_; }
  const std::array<double, kNumCommCategories>& exposed_comm_s() const { return exposed_s_; }
  const std::array<std::vector<TimeInterval>, kNumCommCategories>& exposed() const {
    return exposed_;
  }
  // Calc-stream idle intervals within [0, step_end].
  std::vector<TimeInterval> CalcIdle(double step_end) const;

 private:
  void Change(double t, InstructionKind kind, bool on_calc, CommCategory comm, int delta);
  void Extend(std::vector<TimeInterval>& list, double from, double to);

  bool intervals_;
  double last_ = 0;
  int computing_ = 0;
  int calc_computing_ = 0;
  std::array<int, kNumCommCategories> communicating_{};
  double calc_compute_s_ = 0;
  std::array<double, kNumCommCategories> exposed_s_{};
  std::array<std::vector<TimeInterval>, kNumCommCategories> exposed_;
  std::vector<TimeInterval> calc_busy_;
};

struct RankTimelineMetrics {
  int rank = 0;
  double step_time_s = 0;  // the rank's last end
  double calc_compute_s = 0;
  double bubble_fraction = 0;  // 1 - calc compute / the step's time
  std::array<double, kNumCommCategories> exposed_comm_s{};
  std::array<std::vector<TimeInterval>, kNumCommCategories> exposed;
  std::vector<TimeInterval> calc_idle;
};

struct TimelineMetrics {
  double step_time_s = 0;      // latest end over ranks, from the earliest start
  double bubble_fraction = 0;  // mean over ranks
  std::array<double, kNumCommCategories> exposed_comm_s{};  // mean over ranks
  std::vector<RankTimelineMetrics> ranks;  // by rank
};

// The metrics of a trace (one step). Times are taken from the earliest
// start in the trace. With `intervals`, the per-rank interval lists are
// filled (for drawing).
TimelineMetrics AnalyzeTrace(const std::vector<TraceEvent>& events, bool intervals = false);

}  // namespace loom

#endif  // LOOM_SCHEDULER_TIMELINE_METRICS_H_
