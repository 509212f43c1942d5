// The pipeline schedules behind the table in schedule.cc, and the few
// helpers they share. Callers go through Schedules() / FindSchedule(); this
// header is for schedule.cc, the schedule_<name>.cc files and their tests.
//
// Each schedule is documented where it is defined, with its phases, its
// published source and a worked example:
//   ScheduleFThenB     schedule_fthenb.cc
//   Schedule1F1B       schedule_1f1b.cc
//   ScheduleEager1F1B  schedule_eager_1f1b.cc
//   ScheduleVPP        schedule_vpp.cc
//   ScheduleZBH1       schedule_zbh1.cc
//   Schedule1F1BOverlap schedule_1f1b_overlap.cc
//   ScheduleZBV        schedule_zbv.cc
// Notation in the examples: F3 forward of micro-batch 3, B3 its whole
// backward, b3 / w3 its input-gradient (B) / weight-gradient (W) half, F3.1
// micro-batch 3 of chunk 1, O the optimizer.
#ifndef LOOM_SCHEDULER_SCHEDULES_IMPL_H_
#define LOOM_SCHEDULER_SCHEDULES_IMPL_H_

#include <vector>

#include "scheduler/job.h"

namespace loom {

StatusOr<std::vector<Job>> ScheduleFThenB(const ScheduleParams& p);
StatusOr<std::vector<Job>> Schedule1F1B(const ScheduleParams& p);
StatusOr<std::vector<Job>> ScheduleEager1F1B(const ScheduleParams& p);
StatusOr<std::vector<Job>> ScheduleVPP(const ScheduleParams& p);
StatusOr<std::vector<Job>> ScheduleZBH1(const ScheduleParams& p);
StatusOr<std::vector<Job>> Schedule1F1BOverlap(const ScheduleParams& p);
StatusOr<std::vector<Job>> ScheduleZBV(const ScheduleParams& p);

namespace schedule_internal {

// What every schedule needs: at least one stage, a stage in range, at least
// one micro-batch, and a single chunk unless the schedule uses chunks. The
// message names the strategy field at fault and the schedule.
inline Status CheckCommonParams(const ScheduleParams& p, const char* schedule,
                                bool uses_chunks) {
  if (p.num_stages < 1) {
    return InvalidArgument("pipeline.degree (", p.num_stages,
                           ") must be at least 1 for ", schedule);
  }
  if (p.stage < 0 || p.stage >= p.num_stages) {
    return InvalidArgument("stage ", p.stage,
                           " is out of range for pipeline.degree (",
                           p.num_stages, ") in ", schedule);
  }
  if (p.micro_batches < 1) {
    return InvalidArgument("pipeline.micro_batches (", p.micro_batches,
                           ") must be at least 1 for ", schedule);
  }
  if (!uses_chunks && p.chunks != 1) {
    return InvalidArgument("pipeline.vpp_degree (", p.chunks,
                           ") must be 1 for ", schedule,
                           "; only VPP and ZBV run model chunks");
  }
  return Status::OK();
}

inline Job Forward(int micro_batch, int chunk = 0) {
  return Job{JobType::kForward, micro_batch, chunk};
}
inline Job Backward(int micro_batch, int chunk = 0) {
  return Job{JobType::kBackward, micro_batch, chunk};
}
inline Job BackwardB(int micro_batch, int chunk = 0) {
  return Job{JobType::kBackwardB, micro_batch, chunk};
}
inline Job BackwardW(int micro_batch, int chunk = 0) {
  return Job{JobType::kBackwardW, micro_batch, chunk};
}
inline Job Optimizer() { return Job{JobType::kOptimizer, 0, 0}; }

}  // namespace schedule_internal
}  // namespace loom

#endif  // LOOM_SCHEDULER_SCHEDULES_IMPL_H_
