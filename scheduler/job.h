// Jobs and job lists: what a pipeline schedule produces for one stage.
//
// A Job names one program of a rank (its type and chunk) run for one
// micro-batch. A schedule is a pure function from (stage, stages,
// micro-batches, chunks) to the stage's ordered job list; the executor and
// the simulator both consume that list.
#ifndef LOOM_SCHEDULER_JOB_H_
#define LOOM_SCHEDULER_JOB_H_

#include <string>
#include <vector>

#include "framework/status.h"

namespace loom {

enum class JobType {
  kForward,
  kBackward,   // input and weight gradients together
  kBackwardB,  // input gradients only (zero-bubble "B")
  kBackwardW,  // weight gradients only (zero-bubble "W")
  kOptimizer,
};

// "forward", "backward", "backward_b", "backward_w", "optimizer".
const char* JobTypeName(JobType type);
StatusOr<JobType> ParseJobType(const std::string& name);

struct Job {
  JobType type = JobType::kForward;
  int micro_batch = 0;  // 0 for the optimizer job
  int chunk = 0;        // virtual pipeline chunk; 0 without VPP
  // A part of the program: ops [op_begin, op_end), the part-th of its job.
  // op_end -1 is the whole program from op_begin; a job whose program runs
  // whole has part 0, op_begin 0, op_end -1. Overlap schedules interleave
  // the parts of two jobs, so that the communication ending one part runs
  // under the computation of the other job's next part.
  int part = 0;
  int op_begin = 0;
  int op_end = -1;

  bool whole() const { return op_begin == 0 && op_end < 0; }
  // The same program run for the same micro-batch (any part).
  bool SameJob(const Job& o) const {
    return type == o.type && micro_batch == o.micro_batch && chunk == o.chunk;
  }
  bool operator==(const Job& o) const {
    return SameJob(o) && part == o.part && op_begin == o.op_begin && op_end == o.op_end;
  }
  bool operator!=(const Job& o) const { return !(*this == o); }
};

// Compact form for golden tests and listings: F3, B3, b3 (B half), w3
// (W half), O; with chunks, F3.1 is micro-batch 3 of chunk 1; a part of a
// split job adds #K: B3#2 is the third part of B3.
std::string JobToString(const Job& job, bool with_chunk = false);
std::string JobListToString(const std::vector<Job>& jobs, bool with_chunk = false);
// The inverse of JobToString: "F3", "w2.1", "B3#2", "O" (a part's op
// range is not in its name: op_begin 0, op_end -1).
StatusOr<Job> ParseJob(const std::string& text);

struct ScheduleParams {
  int stage = 0;
  int num_stages = 1;
  int micro_batches = 1;
  int chunks = 1;  // VPP degree; 1 for every other schedule
  // Overlap schedules: the op indices where the forward and the backward
  // program are cut into parts (ascending, each in (0, program size)).
  std::vector<int> forward_cuts = {}, backward_cuts = {};
  // Overlap schedules: at most this many micro-batches in flight on a
  // stage (0: the schedule's own).
  int max_in_flight = 0;
};

// `job` split at `cuts` (ascending op indices): one part per range, in
// order; `job` itself when there are no cuts.
std::vector<Job> SplitJob(const Job& job, const std::vector<int>& cuts);

}  // namespace loom

#endif  // LOOM_SCHEDULER_JOB_H_
