// A Plan: for every rank, an ordered job list and one program per job kind.
#ifndef LOOM_SCHEDULER_PLAN_H_
#define LOOM_SCHEDULER_PLAN_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "framework/program.h"
#include "scheduler/job.h"
#include "scheduler/layout.h"

namespace loom {

// Which program a job runs: its type and chunk.
struct JobProgramKey {
  JobType type = JobType::kForward;
  int chunk = 0;
  bool operator<(const JobProgramKey& o) const {
    return std::make_pair(static_cast<int>(type), chunk) <
           std::make_pair(static_cast<int>(o.type), o.chunk);
  }
  bool operator==(const JobProgramKey& o) const {
    return type == o.type && chunk == o.chunk;
  }
};
// "forward", or "forward.1" for chunk 1 when the plan has chunks.
std::string JobProgramName(const JobProgramKey& key, bool with_chunk);

struct RankPlan {
  int rank = 0;
  RankCoords coords;
  int num_chunks = 1;
  std::vector<Job> jobs;
  std::map<JobProgramKey, Program> programs;
  // Initializes the rank's parameters and optimizer state.
  Program startup;

  // Identifies the rank's program set: ranks that share their programs
  // (dp replicas of one (pp, mp) position) return the same key, so that
  // lowering can share their instructions.
  const void* programs_key() const { return &programs; }

  const Program* ProgramFor(const Job& job) const {
    auto it = programs.find({job.type, job.chunk});
    return it == programs.end() ? nullptr : &it->second;
  }
};

struct Plan {
  ParallelLayout layout;
  std::vector<RankPlan> ranks;
};

// {"ranks":[{"rank":R,"coords":{"dp":..,"mp":..,"pp":..},
//   "jobs":[{"type":"forward","micro_batch":0,"chunk":0},...],
//   "programs":{"forward":["lookup_table",...],...}}]}
std::string PlanToJson(const Plan& plan);
// One block per rank: its coordinates, the job list in compact form and
// each program's op count.
std::string PlanToText(const Plan& plan);

}  // namespace loom

#endif  // LOOM_SCHEDULER_PLAN_H_
