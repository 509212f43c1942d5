#include "scheduler/schedules_impl.h"

namespace loom {

using schedule_internal::Backward;
using schedule_internal::Forward;
using schedule_internal::Optimizer;

// FThenB (GPipe; Paddle pipeline_scheduler_pass/pipeline_fthenb.py): every
// stage runs all forwards, then all backwards, both in micro-batch order,
// then the optimizer. There is no steady state: the whole forward sweep is
// the warm-up and the whole backward sweep the cool-down. Every micro-batch's
// activations are alive at once (peak m), and with unit forward time tF and
// backward time tB the step takes (m + p - 1) * (tF + tB).
//
// Needs: pipeline.micro_batches >= 1 (any number of micro-batches works).
//
// Worked example, 4 stages x 8 micro-batches (each list then ends with O):
//
//   stage | forwards                | backwards
//   ------+-------------------------+------------------------
//   0..3  | F0 F1 F2 F3 F4 F5 F6 F7 | B0 B1 B2 B3 B4 B5 B6 B7
StatusOr<std::vector<Job>> ScheduleFThenB(const ScheduleParams& p) {
  LOOM_RETURN_IF_ERROR(
      schedule_internal::CheckCommonParams(p, "FThenB", /*uses_chunks=*/false));
  std::vector<Job> jobs;
  for (int mb = 0; mb < p.micro_batches; ++mb) jobs.push_back(Forward(mb));
  for (int mb = 0; mb < p.micro_batches; ++mb) jobs.push_back(Backward(mb));
  jobs.push_back(Optimizer());
  return jobs;
}

}  // namespace loom
