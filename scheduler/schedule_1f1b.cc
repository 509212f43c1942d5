#include "scheduler/schedules_impl.h"

namespace loom {

using schedule_internal::Backward;
using schedule_internal::Forward;
using schedule_internal::Optimizer;

// 1F1B (PipeDream-flush; Megatron-LM megatron/core/pipeline_parallel/
// schedules.py, forward_backward_pipelining_without_interleaving; Paddle
// pipeline_scheduler_pass/pipeline_1f1b.py). With p stages, m micro-batches,
// stage s:
//   warm-up       p - s - 1 forwards, filling the stages below this one;
//   steady state  m - (p - s - 1) pairs: the next forward, then the backward
//                 of the oldest micro-batch in flight;
//   cool-down     the p - s - 1 backwards still in flight; then O.
// At most p - s micro-batches are in flight on stage s (p on stage 0), and
// with unit times the step takes (m + p - 1) * (tF + tB), as FThenB does.
//
// Paddle counts p - s warm-up forwards and pairs the steady state as
// (backward, forward); that is the same list. Megatron also caps the warm-up
// at m, which makes m < p legal (the list is then FThenB's); Paddle asserts
// m >= p, and so does Loom, since for m < p 1F1B saves nothing.
//
// Needs: pipeline.micro_batches >= pipeline.degree.
//
// Worked example, 4 stages x 6 micro-batches (each list then ends with O):
//
//   stage | warm-up  | steady state (F, B)                 | cool-down
//   ------+----------+-------------------------------------+----------
//   0     | F0 F1 F2 | F3 B0 F4 B1 F5 B2                   | B3 B4 B5
//   1     | F0 F1    | F2 B0 F3 B1 F4 B2 F5 B3             | B4 B5
//   2     | F0       | F1 B0 F2 B1 F3 B2 F4 B3 F5 B4       | B5
//   3     |          | F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 |
StatusOr<std::vector<Job>> Schedule1F1B(const ScheduleParams& p) {
  LOOM_RETURN_IF_ERROR(
      schedule_internal::CheckCommonParams(p, "1F1B", /*uses_chunks=*/false));
  if (p.micro_batches < p.num_stages) {
    return InvalidArgument("pipeline.micro_batches (", p.micro_batches,
                           ") must be at least pipeline.degree (", p.num_stages,
                           ") for 1F1B");
  }
  const int m = p.micro_batches;
  const int warmup = p.num_stages - p.stage - 1;
  std::vector<Job> jobs;
  // Warm-up.
  for (int mb = 0; mb < warmup; ++mb) jobs.push_back(Forward(mb));
  // Steady state: forward mb, then the backward `warmup` micro-batches older.
  for (int mb = warmup; mb < m; ++mb) {
    jobs.push_back(Forward(mb));
    jobs.push_back(Backward(mb - warmup));
  }
  // Cool-down.
  for (int mb = m - warmup; mb < m; ++mb) jobs.push_back(Backward(mb));
  jobs.push_back(Optimizer());
  return jobs;
}

}  // namespace loom
