// The plan verifier's shared state, for its three source files. Callers use
// VerifyPlan() in plan_verifier.h; the checks are numbered as there:
//   plan_verifier.cc           1-4: the plan's shape, and per rank its job
//                              list, programs, attributes, events, data flow
//   plan_verifier_comm.cc      5-6: across ranks, transfer pairing and
//                              collective sequences
//   plan_verifier.cc           7: the lowered plan simulated at zero cost
//                              (scheduler/simulator.h)
#ifndef LOOM_SCHEDULER_PLAN_VERIFIER_INTERNAL_H_
#define LOOM_SCHEDULER_PLAN_VERIFIER_INTERNAL_H_

#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "scheduler/plan.h"
#include "scheduler/plan_verifier.h"

namespace loom {
namespace plan_verifier_internal {

inline constexpr int kNumRings = static_cast<int>(std::size(kAllRings));

enum class OpKind { kCompute, kSend, kRecv, kCollective };

struct OpInfo {
  const Op* op = nullptr;
  OpKind kind = OpKind::kCompute;
  int peer = -1;                     // send / recv: the peer's pp stage
  RingId ring = kMpRing;             // collective: its ring; transfer: pp or pp_grad
  const std::string* var = nullptr;  // send: X; recv: Out
};

struct VarRead {
  int op = 0;
  std::string_view var;
};

struct EventUse {
  int op = 0;
  std::string_view event;
};

// What the checks need of one program, computed once however many jobs run
// it.
struct ProgramInfo {
  const Program* program = nullptr;
  std::vector<OpInfo> ops;
  // The first read of each var that the program neither wrote before nor
  // declares persistable or data: it must come from an earlier job.
  std::vector<VarRead> external_reads;
  std::vector<VarRead> writes;  // each var once, at its first write
  std::vector<EventUse> records;
  std::vector<EventUse> waits;
};

// One op executed by one rank: job `job` of the rank's list, op `op` of its
// program.
inline bool IsBackwardType(JobType t) {
  return t == JobType::kBackward || t == JobType::kBackwardB ||
         t == JobType::kBackwardW;
}

struct OpRef {
  int rank = 0;
  int job = 0;
  int op = 0;
};

class PlanVerifier {
 public:
  explicit PlanVerifier(const Plan& plan) : plan_(plan), layout_(plan.layout) {}

  // Runs the checks in order; the first error found is returned.
  Status Run(PlanVerifyStats* stats);

 private:
  struct RankInfo {
    // The program of each job, in job order.
    std::vector<const ProgramInfo*> jobs;
  };

  int world() const { return layout_.world_size(); }
  const RankPlan& rank(int r) const { return plan_.ranks[r]; }
  const Job& job(int r, int j) const { return plan_.ranks[r].jobs[j]; }
  // The ops [begin, end) job j of rank r runs (its part of the program).
  std::pair<int, int> OpsOf(int r, int j) const {
    const Job& jb = job(r, j);
    const int size = static_cast<int>(ranks_[r].jobs[j]->ops.size());
    return {jb.op_begin, jb.op_end < 0 ? size : jb.op_end};
  }
  bool Runs(int r, int j, int op) const {
    const auto [begin, end] = OpsOf(r, j);
    return op >= begin && op < end;
  }
  const OpInfo& op(const OpRef& ref) const {
    return ranks_[ref.rank].jobs[ref.job]->ops[ref.op];
  }

  // ---- Locations (plan_verifier.cc) -----------------------------------------
  std::string RankName(int r) const;
  std::string JobName(int r, int j) const;
  std::string Where(int r, int j) const;
  std::string Where(const OpRef& ref) const;

  // ---- 1-4 (plan_verifier.cc) -----------------------------------------------
  Status CheckShape() const;
  Status CheckJobs(int r);
  // Classifies the ops of `program` (first run by job `j` of rank `r`, which
  // errors name) and finds its external reads, writes and events.
  Status AnalyzeProgram(int r, int j, const Program& program,
                        ProgramInfo* pi) const;
  Status CheckEvents(int r) const;
  Status CheckDataFlow(int r) const;
  // A reduction over a persistable var (a gradient accumulator) that runs
  // in the step must come after every write to that var in the step.
  Status CheckReductionsFollowWrites(int r) const;

  // ---- 5 and 6 (plan_verifier_comm.cc) --------------------------------------
  // A channel carries the transfers from one stage to one rank on one of the
  // pipeline's rings: both ends share dp and mp, so (receiving rank, sending
  // stage, ring) names it.
  int Channel(int dst_rank, int src_stage, RingId ring) const {
    return (dst_rank * layout_.pp + src_stage) * 2 + (ring == kPpGradRing ? 1 : 0);
  }
  // The group (an index into groups_) of rank `r` on `ring`, -1 if it has
  // none.
  int Group(int r, RingId ring) const { return group_of_[r * kNumRings + ring - 1]; }
  std::vector<OpRef>& Sequence(int r, RingId ring) {
    return sequences_[r * kNumRings + ring - 1];
  }

  // Lists, in execution order, the sends and recvs of every channel and the
  // collectives of every rank and ring; forms the collective groups.
  void CollectCommunication();
  Status CheckTransfers();
  Status CheckCollectives();

  // ---- 7 (plan_verifier.cc) -------------------------------------------------
  Status CheckDeadlockFreedom();

  const Plan& plan_;
  const ParallelLayout& layout_;
  std::vector<RankInfo> ranks_;
  std::unordered_map<const Program*, std::unique_ptr<ProgramInfo>> programs_;
  std::vector<std::vector<OpRef>> sends_, recvs_;  // by channel
  std::vector<std::vector<OpRef>> sequences_;      // by rank and ring
  std::vector<std::vector<int>> groups_;           // members (RingMembers)
  std::vector<int> group_of_;                      // by rank and ring
  PlanVerifyStats stats_;
};

}  // namespace plan_verifier_internal
}  // namespace loom

#endif  // LOOM_SCHEDULER_PLAN_VERIFIER_INTERNAL_H_
