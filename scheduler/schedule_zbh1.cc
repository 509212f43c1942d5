#include "scheduler/schedules_impl.h"

namespace loom {

using schedule_internal::Backward;
using schedule_internal::BackwardB;
using schedule_internal::BackwardW;
using schedule_internal::Forward;
using schedule_internal::Optimizer;

// ZBH1, zero-bubble H1 (Qi et al. 2023, "Zero Bubble Pipeline
// Parallelism"): the backward splits into B (input gradient, which the
// stage above waits for) and W (weight gradient, which nobody waits for),
// and W runs late to fill bubbles, with the same peak memory as 1F1B (at
// most p micro-batches in flight on any stage).
//
// The order is Paddle's, pipeline_scheduler_pass/pipeline_zero_bubble.py
// (PipelineZeroBubblePipelinePass), not the paper's figure. With p stages,
// m micro-batches and stage s:
//   warm-up       p - s forwards (1F1B's warm-up plus its first forward);
//   B first       s pairs (b, F): the first s backwards give only their B
//                 half, so gradients flow upstream sooner; their W waits;
//   steady state  m - p pairs (B, F) with whole backwards;
//   cool-down     p - s - 1 whole backwards, then the last micro-batch's
//                 backward, split into b, w on every stage but stage 0 so
//                 its gradient leaves before its W runs;
//   deferred W    w0 .. w(s-1), in the bubble 1F1B leaves there; then O.
// Stage 0 never splits: its list is 1F1B's. In the unit-cost simulation
// (F = b = w = 1, whole B = 2) the step takes 3m + 2p - 3 (p >= 2) against
// 1F1B's 3m + 3p - 3. The paper's ZB-H1 figure (and Paddle's first version of
// this pass) splits every backward and runs steady (F, b, w) triples, each W
// trailing its B by s micro-batches; that reaches 3m + p - 1 in the same
// model. Loom keeps Paddle's current order.
//
// Needs: pipeline.micro_batches >= pipeline.degree (Paddle asserts this).
//
// Worked example, 4 stages x 6 micro-batches (then O):
//
//   s | warm-up     | b, F              | B, F        | cool-down   | late W
//   --+-------------+-------------------+-------------+-------------+---------
//   0 | F0 F1 F2 F3 |                   | B0 F4 B1 F5 | B2 B3 B4 B5 |
//   1 | F0 F1 F2    | b0 F3             | B1 F4 B2 F5 | B3 B4 b5 w5 | w0
//   2 | F0 F1       | b0 F2 b1 F3       | B2 F4 B3 F5 | B4 b5 w5    | w0 w1
//   3 | F0          | b0 F1 b1 F2 b2 F3 | B3 F4 B4 F5 | b5 w5       | w0 w1 w2
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
  int b = 0;  // next backward
  std::vector<Job> jobs;
  // Warm-up.
  while (f < p.num_stages - s) jobs.push_back(Forward(f++));
  // B first: B halves only.
  for (int i = 0; i < s; ++i) {
    jobs.push_back(BackwardB(b++));
    jobs.push_back(Forward(f++));
  }
  // Steady state.
  while (f < m) {
    jobs.push_back(Backward(b++));
    jobs.push_back(Forward(f++));
  }
  // Cool-down.
  while (b < m - 1) jobs.push_back(Backward(b++));
  if (s == 0) {
    jobs.push_back(Backward(m - 1));
  } else {
    jobs.push_back(BackwardB(m - 1));
    jobs.push_back(BackwardW(m - 1));
  }
  // Deferred W halves.
  for (int mb = 0; mb < s; ++mb) jobs.push_back(BackwardW(mb));
  jobs.push_back(Optimizer());
  return jobs;
}

}  // namespace loom
