// Pipeline schedules: one file per schedule (schedule_<name>.cc), each a
// pure function from ScheduleParams to a stage's job list, and a table that
// names them.
#ifndef LOOM_SCHEDULER_SCHEDULE_H_
#define LOOM_SCHEDULER_SCHEDULE_H_

#include <string>
#include <vector>

#include "scheduler/job.h"

namespace loom {

using ScheduleFn = StatusOr<std::vector<Job>> (*)(const ScheduleParams&);

struct ScheduleInfo {
  const char* name;  // as written in Strategy.pipeline.schedule_mode
  ScheduleFn fn;
  bool splits_backward;  // uses backward_b / backward_w jobs
  bool uses_chunks;      // VPP
  const char* summary;
  // Interleaves parts of jobs: needs ScheduleParams' cuts.
  bool splits_jobs = false;
  // The same schedule with no jobs interleaved (1F1B for 1F1B-overlap): the
  // least overlap it can give up memory for.
  const char* without_overlap = nullptr;
  // Places its chunks in a V (ZBV) rather than interleaved (VPP); see
  // PlaceVirtualStage.
  bool v_shape = false;
};

// FThenB, 1F1B, Eager1F1B, VPP, ZBH1, 1F1B-overlap, ZBV.
const std::vector<ScheduleInfo>& Schedules();
// Error lists the known names.
StatusOr<const ScheduleInfo*> FindSchedule(const std::string& name);
// 1F1B: the schedule Strategy.pipeline.schedule_mode defaults to.
const ScheduleInfo* DefaultSchedule();

// Where a virtual stage runs. The model's layers are cut into stages x
// chunks contiguous virtual stages, v = 0 first.
struct StageAndChunk {
  int stage = 0;
  int chunk = 0;
};
// Interleaved (VPP): v runs on stage v % stages as chunk v / stages, so a
// micro-batch crosses every stage once per chunk. V-shaped (ZBV, two
// chunks): the first `stages` virtual stages run down the stages as chunk 0
// and the rest come back up as chunk 1, v on stage 2 * stages - 1 - v; the
// first and the last virtual stage share stage 0, and the turn at the last
// stage needs no transfer.
StageAndChunk PlaceVirtualStage(int v, int stages, bool v_shape);
// The inverse: the virtual stage that `chunk` of `stage` runs.
int VirtualStageOf(int stage, int chunk, int stages, bool v_shape);

// Checks what every schedule must satisfy on one stage, whatever its order:
// every (micro-batch, chunk) has exactly one forward and one backward (or
// one B and one W), each backward after its forward, each W after its B,
// and one optimizer job, last. The message names the job at fault.
Status ValidateJobList(const ScheduleParams& params,
                       const std::vector<Job>& jobs);

}  // namespace loom

#endif  // LOOM_SCHEDULER_SCHEDULE_H_
