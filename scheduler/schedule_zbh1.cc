#include "scheduler/schedules_impl.h"

namespace loom {

using schedule_internal::BackwardB;
using schedule_internal::BackwardW;
using schedule_internal::Forward;
using schedule_internal::Optimizer;

// ZBH1, the handcrafted ZB-H1 schedule of Qi, Wan, Huang, Lin, "Zero Bubble
// Pipeline Parallelism" (ICLR 2024), section 2.1 "Memory efficient
// schedule", figure 3 (top) and table 2. Every backward splits into B (input
// gradient, which the stage above waits for) and W (weight gradient, which
// nobody waits for). The order is 1F1B's with each B split, and with the W
// of micro-batch j - s run right after the B of micro-batch j: stage s starts
// its W passes s micro-batches late, so the last W passes fill the tail
// bubble 1F1B leaves. With p stages, m micro-batches and stage s (0-based):
//   warm-up      p - s - 1 forwards (1F1B's);
//   steady state m - p + s + 1 groups: the next forward F(j + p - s - 1),
//                then b(j), then w(j - s) once j >= s (the first s groups
//                are (F, b) pairs);
//   cool-down    the p - s - 1 remaining (b(j), w(j - s)) pairs;
//   late W       w(m - s) .. w(m - 1), the s W passes still pending; then O.
// The paper gives the order only as the figure; this list is the figure's,
// and the one the two implementations that follow it produce: Paddle's first
// pipeline_scheduler_pass/pipeline_zero_bubble.py (later changed to whole
// backwards in the steady state) and Megatron-DeepSpeed's ZeroBubbleH1Pipeline
// with --enable-zbh1-exact-semantics (which runs stage 0's b, w as one whole
// backward; Loom splits on every stage, as the figure does).
//
// Memory: on every stage at most p micro-batches are in flight (forward done,
// W not yet), and p are reached ("all workers maintain the same number of
// in-flight micro-batches"). Of those, at most p - s still await their B and
// hold full activations (exactly 1F1B's in-flight micro-batches at stage s);
// the other s hold only what W needs. So stage s holds at most
// (p - s) M_B + s M_W, the paper's (p - i + 1) M_B + (i - 1) M_W for worker
// i = s + 1, and the peak, p M_B at stage 0, is 1F1B's.
//
// Time: the bubble is (p - 1)(T_F + T_B - T_W) against 1F1B's
// (p - 1)(T_F + T_B + T_W) (table 2); with T_F = T_B = T_W = 1 the step takes
// 3m + p - 1, against 1F1B's 3m + 3p - 3.
//
// Needs: pipeline.micro_batches >= pipeline.degree (as Paddle asserts; the
// figure and table assume it).
//
// Worked example, 4 stages x 8 micro-batches (each list then ends with O):
//
// s  warm-up   (F, b)             (F, b, w): w(j - s) after b(j)
// 0  F0 F1 F2                     F3 b0 w0 F4 b1 w1 F5 b2 w2 F6 b3 w3 F7 b4 w4
// 1  F0 F1     F2 b0              F3 b1 w0 F4 b2 w1 F5 b3 w2 F6 b4 w3 F7 b5 w4
// 2  F0        F1 b0 F2 b1        F3 b2 w0 F4 b3 w1 F5 b4 w2 F6 b5 w3 F7 b6 w4
// 3            F0 b0 F1 b1 F2 b2  F3 b3 w0 F4 b4 w1 F5 b5 w2 F6 b6 w3 F7 b7 w4
//
// s  cool-down          late W
// 0  b5 w5 b6 w6 b7 w7
// 1  b6 w5 b7 w6        w7
// 2  b7 w5              w6 w7
// 3                     w5 w6 w7
//
// In the unit-time simulation every stage idles p - 1 = 3 steps (s waiting
// for F0, p - 1 - s waiting for b0) and all end at step 27 (1F1B: 33), the
// trapezoid of the paper's figure.
StatusOr<std::vector<Job>> ScheduleZBH1(const ScheduleParams& p) {
  LOOM_RETURN_IF_ERROR(
      schedule_internal::CheckCommonParams(p, "ZBH1", /*uses_chunks=*/false));
  if (p.micro_batches < p.num_stages) {
    return InvalidArgument("pipeline.micro_batches (", p.micro_batches,
                           ") must be at least pipeline.degree (", p.num_stages,
                           ") for ZBH1");
  }
  const int m = p.micro_batches;
  const int s = p.stage;
  int f = 0;  // next forward
  int b = 0;  // next B half
  int w = 0;  // next W half; runs s micro-batches behind b
  std::vector<Job> jobs;
  // b(j), then w(j - s) if there is one.
  auto backward = [&] {
    jobs.push_back(BackwardB(b++));
    if (b > s) jobs.push_back(BackwardW(w++));
  };
  // Warm-up.
  while (f < p.num_stages - s - 1) jobs.push_back(Forward(f++));
  // Steady state.
  while (f < m) {
    jobs.push_back(Forward(f++));
    backward();
  }
  // Cool-down.
  while (b < m) backward();
  // Late W.
  while (w < m) jobs.push_back(BackwardW(w++));
  jobs.push_back(Optimizer());
  return jobs;
}

}  // namespace loom
