#include "scheduler/schedules_impl.h"

namespace loom {

using schedule_internal::Backward;
using schedule_internal::Forward;
using schedule_internal::Optimizer;

// Eager1F1B (Paddle pipeline_scheduler_pass/pipeline_eager_1f1b.py): 1F1B
// with more forwards in flight. Each stage's warm-up is two forwards longer
// than the next stage's instead of one, so a forward's send has a whole job
// of slack before the next stage needs it and can overlap compute. With p
// stages, m micro-batches, stage s and w = 2 * (p - s) - 1:
//   warm-up       w forwards (1F1B, counted as Paddle does, has p - s);
//   steady state  m - w pairs: the backward of the oldest micro-batch in
//                 flight, then the next forward;
//   cool-down     the w backwards still in flight; then O.
// Stage s holds up to w micro-batches (2p - 1 on stage 0, against 1F1B's p);
// the last stage runs exactly as in 1F1B. With free communication the step
// takes the same (m + p - 1) * (tF + tB) as 1F1B; the gain is overlap.
//
// Paddle asserts w <= m on each stage and does not cap w; since stage 0 has
// the largest w, all stages of one pipeline need m >= 2p - 1.
//
// Needs: pipeline.micro_batches >= 2 * pipeline.degree - 1.
//
// Worked example, 3 stages x 6 micro-batches (each list then ends with O):
//
//   stage | warm-up        | steady state (B, F)           | cool-down
//   ------+----------------+-------------------------------+---------------
//   0     | F0 F1 F2 F3 F4 | B0 F5                         | B1 B2 B3 B4 B5
//   1     | F0 F1 F2       | B0 F3 B1 F4 B2 F5             | B3 B4 B5
//   2     | F0             | B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 | B5
StatusOr<std::vector<Job>> ScheduleEager1F1B(const ScheduleParams& p) {
  LOOM_RETURN_IF_ERROR(schedule_internal::CheckCommonParams(
      p, "Eager1F1B", /*uses_chunks=*/false));
  if (p.micro_batches < 2 * p.num_stages - 1) {
    return InvalidArgument("pipeline.micro_batches (", p.micro_batches,
                           ") must be at least 2 * pipeline.degree - 1 (",
                           2 * p.num_stages - 1, ") for Eager1F1B");
  }
  const int m = p.micro_batches;
  const int warmup = 2 * (p.num_stages - p.stage) - 1;
  std::vector<Job> jobs;
  // Warm-up.
  for (int mb = 0; mb < warmup; ++mb) jobs.push_back(Forward(mb));
  // Steady state: the backward `warmup` micro-batches older, then forward mb.
  for (int mb = warmup; mb < m; ++mb) {
    jobs.push_back(Backward(mb - warmup));
    jobs.push_back(Forward(mb));
  }
  // Cool-down.
  for (int mb = m - warmup; mb < m; ++mb) jobs.push_back(Backward(mb));
  jobs.push_back(Optimizer());
  return jobs;
}

}  // namespace loom
