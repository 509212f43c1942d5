// A Plan: for every rank, an ordered job list and one program per job kind.
//
// Ranks that run the same programs (the dp replicas of one (pp, mp)
// position) share one immutable ProgramSet, so a plan of N ranks holds one
// copy of each distinct set, in memory and in a saved file
// (scheduler/plan.proto).
#ifndef LOOM_SCHEDULER_PLAN_H_
#define LOOM_SCHEDULER_PLAN_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "framework/program.h"
#include "scheduler/job.h"
#include "scheduler/layout.h"
#include "scheduler/plan.pb.h"

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

// The programs of one (pp, mp) position.
struct ProgramSet {
  std::map<JobProgramKey, Program> programs;
  // Initializes the parameters and optimizer state of `programs`.
  Program startup;

  ProgramSet Clone() const;
};

struct RankPlan {
  int rank = 0;
  RankCoords coords;
  int num_chunks = 1;
  std::vector<Job> jobs;
  // Shared by every rank running the same programs; null for a rank with
  // none yet.
  std::shared_ptr<const ProgramSet> program_set;
  // What the passes resolved while planning this rank.
  proto::ResolvedStrategy resolved;

  // The rank's job programs and startup program; empty without a set.
  const std::map<JobProgramKey, Program>& programs() const;
  const Program& startup() const;

  // Identifies the rank's program set: ranks that share their programs
  // (dp replicas of one (pp, mp) position) return the same key, so that
  // lowering can share their instructions.
  const void* programs_key() const { return program_set.get(); }

  const Program* ProgramFor(const Job& job) const {
    const auto& all = programs();
    auto it = all.find({job.type, job.chunk});
    return it == all.end() ? nullptr : &it->second;
  }
};

// The rank's program set, made its own first if another rank shares it
// (or created if it has none), for tools and tests that edit one rank's
// programs. Not for use while other threads read the plan. Sets must be
// created non-const (std::make_shared<ProgramSet>), as the planner and
// PlanFromProto create them.
ProgramSet& MutableProgramSet(RankPlan& rank);

struct Plan {
  ParallelLayout layout;
  // What the passes resolved; the same for every rank.
  proto::ResolvedStrategy resolved;
  // What the plan was built for (see proto::ModelDesc).
  std::string model_name;
  std::map<std::string, std::string> model_config;
  std::vector<RankPlan> ranks;
};

// The number of distinct program sets the plan's ranks hold.
int CountProgramSets(const Plan& plan);

// One JSON document (proto::PlanListing through Protobuf's JSON printer):
//   {"ranks":[{"rank":R,"coords":{"dp":..,"mp":..,"pp":..},
//     "jobs":[{"type":"forward","micro_batch":0,"chunk":0},...],
//     "programs":{"backward":["matmul_grad",...],"forward":[...],...}}]}
// Program names are JobProgramName's; keys are sorted, so the output is
// deterministic.
std::string PlanToJson(const Plan& plan);

// A job as the plan artifact and the plan listing write it.
void JobToDesc(const Job& job, proto::JobDesc* desc);
// One block per rank: its coordinates, the job list in compact form and
// each program's op count.
std::string PlanToText(const Plan& plan);

// ---- The artifact (plan_io.cc) ----------------------------------------------

proto::PlanDesc PlanToProto(const Plan& plan);
// Checks what a file can get wrong before anything runs it: the layout,
// each rank's number, coords and program-set index, job types and chunks,
// and every program (parsed and verified). Errors are one line naming the
// rank, job, program set or field, e.g. "rank 3: program_set 5 does not
// exist (the plan has 2)". The whole-plan checks (pairing, deadlock) are
// VerifyPlan's.
StatusOr<Plan> PlanFromProto(const proto::PlanDesc& desc);

// Binary (framed like program files: magic, length, checksum) or, for
// paths ending in .pbtxt, protobuf text format. Saving writes a temporary
// file beside `path` and renames it over, so readers never see half a plan.
Status SavePlan(const Plan& plan, const std::string& path);
// Errors begin with the path.
StatusOr<Plan> LoadPlan(const std::string& path);

}  // namespace loom

#endif  // LOOM_SCHEDULER_PLAN_H_
