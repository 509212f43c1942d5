#include "scheduler/plan_verifier.h"

#include <algorithm>
#include <memory>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "framework/op_registry.h"
#include "scheduler/plan_verifier_internal.h"
#include "scheduler/schedule.h"
#include "scheduler/simulator.h"

namespace loom {
namespace plan_verifier_internal {
namespace {

struct VarMbHash {
  size_t operator()(const std::pair<std::string_view, int>& p) const {
    return std::hash<std::string_view>()(p.first) * 31 +
           static_cast<size_t>(p.second);
  }
};
using VarMbSet =
    std::unordered_set<std::pair<std::string_view, int>, VarMbHash>;

// Attribute readers that report, rather than CHECK, a missing or mistyped
// attribute. The schema default applies.
StatusOr<int> IntAttr(const Op& op, const std::string& name) {
  const proto::Attr* a = FindAttrOrDefault(op.desc(), name);
  if (a == nullptr) return InvalidArgument("has no attribute ", name);
  if (a->type() != proto::INT) {
    return InvalidArgument("attribute ", name, " has type ",
                           proto::AttrType_Name(a->type()), ", not INT");
  }
  return a->i();
}

StatusOr<Shape> LongsAttr(const Op& op, const std::string& name) {
  const proto::Attr* a = FindAttrOrDefault(op.desc(), name);
  if (a == nullptr) return InvalidArgument("has no attribute ", name);
  if (a->type() != proto::LONGS) {
    return InvalidArgument("attribute ", name, " has type ",
                           proto::AttrType_Name(a->type()), ", not LONGS");
  }
  return Shape(a->longs().begin(), a->longs().end());
}

}  // namespace

Status PlanVerifier::Run(PlanVerifyStats* stats) {
  LOOM_RETURN_IF_ERROR(CheckShape());
  ranks_.resize(plan_.ranks.size());
  for (int r = 0; r < world(); ++r) {
    LOOM_RETURN_IF_ERROR(CheckJobs(r));
    LOOM_RETURN_IF_ERROR(CheckEvents(r));
    LOOM_RETURN_IF_ERROR(CheckDataFlow(r));
    LOOM_RETURN_IF_ERROR(CheckReductionsFollowWrites(r));
  }
  CollectCommunication();
  LOOM_RETURN_IF_ERROR(CheckTransfers());
  LOOM_RETURN_IF_ERROR(CheckCollectives());
  LOOM_RETURN_IF_ERROR(CheckDeadlockFreedom());
  if (stats != nullptr) *stats = stats_;
  return Status::OK();
}

// ---- Locations --------------------------------------------------------------
std::string PlanVerifier::RankName(int r) const {
  return StrCat("rank ", r, " (", CoordsToString(rank(r).coords), ")");
}

std::string PlanVerifier::JobName(int r, int j) const {
  return JobToString(job(r, j), rank(r).num_chunks > 1);
}

std::string PlanVerifier::Where(int r, int j) const {
  return StrCat(RankName(r), ", job ", j, " (", JobName(r, j), ")");
}

std::string PlanVerifier::Where(const OpRef& ref) const {
  return StrCat(Where(ref.rank, ref.job), ": op ", ref.op, " (",
                op(ref).op->type(), ")");
}

// ---- 1. The plan's shape ----------------------------------------------------
Status PlanVerifier::CheckShape() const {
  if (layout_.dp < 1 || layout_.mp < 1 || layout_.pp < 1) {
    return InvalidArgument("layout dp=", layout_.dp, " mp=", layout_.mp,
                           " pp=", layout_.pp, " has a degree below 1");
  }
  if (static_cast<int>(plan_.ranks.size()) != world()) {
    return InvalidArgument(
        "plan has ", plan_.ranks.size(), " ranks but layout dp=", layout_.dp,
        " mp=", layout_.mp, " pp=", layout_.pp, " needs ", world());
  }
  for (int r = 0; r < world(); ++r) {
    const RankPlan& rp = rank(r);
    if (rp.rank != r) {
      return InvalidArgument("rank entry ", r, " says it is rank ", rp.rank);
    }
    if (!(rp.coords == layout_.Coords(r))) {
      return InvalidArgument("rank ", r, " has coordinates ",
                             CoordsToString(rp.coords), " but the layout ",
                             "puts it at ",
                             CoordsToString(layout_.Coords(r)));
    }
    if (rp.num_chunks < 1) {
      return InvalidArgument(RankName(r), ": num_chunks is ", rp.num_chunks);
    }
  }
  return Status::OK();
}

// ---- 2. Job lists, programs, communication attributes -----------------------
Status PlanVerifier::CheckJobs(int r) {
  const RankPlan& rp = rank(r);
  int max_mb = 0;
  for (const Job& j : rp.jobs) max_mb = std::max(max_mb, j.micro_batch);
  ScheduleParams params{rp.coords.pp, layout_.pp, max_mb + 1, rp.num_chunks};
  Status st = ValidateJobList(params, rp.jobs);
  if (!st.ok()) {
    // ValidateJobList says "stage S, job J (F3): ..." or "stage S: ...";
    // the rank replaces the stage.
    std::string msg = st.message();
    const std::string stage = StrCat("stage ", rp.coords.pp);
    if (msg.compare(0, stage.size(), stage) == 0)
      msg.erase(0, stage.size());
    else
      msg = ": " + msg;
    return Status(st.code(), RankName(r) + msg);
  }
  RankInfo& info = ranks_[r];
  info.jobs.reserve(rp.jobs.size());
  for (int j = 0; j < static_cast<int>(rp.jobs.size()); ++j) {
    const Program* program = rp.ProgramFor(rp.jobs[j]);
    if (program == nullptr) {
      return NotFound(Where(r, j), ": the rank has no ",
                      JobProgramName({rp.jobs[j].type, rp.jobs[j].chunk},
                                     rp.num_chunks > 1),
                      " program");
    }
    auto it = programs_.find(program);
    if (it == programs_.end()) {
      auto pi = std::make_unique<ProgramInfo>();
      LOOM_RETURN_IF_ERROR(AnalyzeProgram(r, j, *program, pi.get()));
      it = programs_.emplace(program, std::move(pi)).first;
    }
    info.jobs.push_back(it->second.get());
    const Job& jb = rp.jobs[j];
    const int size = static_cast<int>(it->second->ops.size());
    if (jb.op_begin < 0 || jb.op_begin > size ||
        (jb.op_end >= 0 && (jb.op_end <= jb.op_begin || jb.op_end > size))) {
      return InvalidArgument(Where(r, j), ": runs ops ", jb.op_begin, "-", jb.op_end,
                             ", outside its program's ", size, " ops");
    }
  }
  return Status::OK();
}

Status PlanVerifier::AnalyzeProgram(int r, int j, const Program& program,
                                     ProgramInfo* pi) const {
  const Block& block = program.global_block();
  const int stage = rank(r).coords.pp;
  pi->program = &program;
  pi->ops.reserve(block.num_ops());
  // Vars whose availability to later reads is settled: written earlier,
  // persistable or data, or already listed as an external read.
  std::unordered_set<std::string_view> settled;
  std::unordered_set<std::string_view> written;
  int k = 0;
  for (const Op* op : block.ops()) {
    auto where = [&] {
      return StrCat(Where(r, j), ": op ", k, " (", op->type(), ")");
    };
    auto bad_attr = [&](const Status& s) {
      return Status(s.code(), StrCat(where(), ": ", s.message()));
    };
    OpInfo oi;
    oi.op = op;
    const std::string& type = op->type();
    const CommKind comm = CommKindOf(type);
    if (comm == CommKind::kSend || comm == CommKind::kRecv) {
      const bool send = comm == CommKind::kSend;
      oi.kind = send ? OpKind::kSend : OpKind::kRecv;
      StatusOr<int> peer = IntAttr(*op, "peer");
      if (!peer.ok()) return bad_attr(peer.status());
      oi.peer = *peer;
      if (oi.peer < 0 || oi.peer >= layout_.pp) {
        return InvalidArgument(where(), ": peer ", oi.peer,
                               " is not a pipeline stage (pp=", layout_.pp,
                               ")");
      }
      if (oi.peer == stage) {
        return InvalidArgument(where(), ": peer ", oi.peer,
                               " is the rank's own stage");
      }
      StatusOr<int> ring = IntAttr(*op, "ring_id");
      if (!ring.ok()) return bad_attr(ring.status());
      if (*ring != kPpRing && !(*ring == kPpGradRing && layout_.v_shape)) {
        return InvalidArgument(where(), ": ring_id ", *ring, " is not a pipeline ring (",
                               static_cast<int>(kPpRing), " pp",
                               layout_.v_shape ? StrCat(", ", static_cast<int>(kPpGradRing),
                                                             " pp_grad")
                                                    : "",
                               ")");
      }
      oi.ring = static_cast<RingId>(*ring);
      oi.var = send ? &op->Input("X") : &op->Output("Out");
      if (oi.var->empty()) {
        return InvalidArgument(where(), ": has no ",
                               send ? "input X" : "output Out");
      }
      if (send && block.FindVar(*oi.var) == nullptr) {
        return InvalidArgument(where(), ": sends var '", *oi.var,
                               "', which the program does not declare");
      }
      if (!send) {
        StatusOr<Shape> shape = LongsAttr(*op, "out_shape");
        if (!shape.ok()) return bad_attr(shape.status());
        StatusOr<int> dtype = IntAttr(*op, "dtype");
        if (!dtype.ok()) return bad_attr(dtype.status());
        if (!proto::DataType_IsValid(*dtype)) {
          return InvalidArgument(where(), ": attribute dtype ", *dtype,
                                 " is not a data type");
        }
      }
    } else if (CommKindOf(type) == CommKind::kCollective) {
      oi.kind = OpKind::kCollective;
      StatusOr<int> ring = IntAttr(*op, "ring_id");
      if (!ring.ok()) return bad_attr(ring.status());
      if (*ring < kMpRing || *ring >= kNumRingIds) {
        std::string known;  // "1 mp, 2 dp, 3 pp, 4 shared_param"
        for (RingId id : kAllRings) {
          known += StrCat(known.empty() ? "" : ", ", static_cast<int>(id), " ",
                          RingName(id));
        }
        return InvalidArgument(where(), ": ring_id ", *ring,
                               " is not a known ring (", known, ")");
      }
      oi.ring = static_cast<RingId>(*ring);
      for (const auto& slot : op->desc().inputs()) {
        for (const std::string& v : slot.vars()) {
          if (!v.empty() && block.FindVar(v) == nullptr) {
            return InvalidArgument(where(), ": input ", slot.name(), " var '",
                                   v, "' is not declared in the program");
          }
        }
      }
    }
    pi->ops.push_back(oi);

    for (const auto& slot : op->desc().inputs()) {
      for (const std::string& v : slot.vars()) {
        if (v.empty() || !settled.insert(v).second) continue;
        const proto::VarDesc* desc = block.FindVar(v);
        if (desc != nullptr && (desc->persistable() || desc->is_data())) {
          continue;
        }
        pi->external_reads.push_back({k, v});
      }
    }
    for (const auto& slot : op->desc().outputs()) {
      for (const std::string& v : slot.vars()) {
        if (v.empty()) continue;
        settled.insert(v);
        if (written.insert(v).second) pi->writes.push_back({k, v});
      }
    }
    for (const std::string& e : op->desc().record_events()) {
      pi->records.push_back({k, e});
    }
    for (const std::string& e : op->desc().wait_events()) {
      pi->waits.push_back({k, e});
    }
    ++k;
  }
  return Status::OK();
}

// ---- 3. Events --------------------------------------------------------------
Status PlanVerifier::CheckEvents(int r) const {
  const RankInfo& info = ranks_[r];
  bool any_wait = false;
  for (const ProgramInfo* pi : info.jobs) any_wait |= !pi->waits.empty();
  if (!any_wait) return Status::OK();
  VarMbSet in_micro_batch;  // (event, micro-batch)
  std::unordered_set<std::string_view> by_optimizer, anywhere;
  for (int j = 0; j < static_cast<int>(info.jobs.size()); ++j) {
    const Job& jb = job(r, j);
    for (const EventUse& e : info.jobs[j]->records) {
      if (!Runs(r, j, e.op)) continue;
      anywhere.insert(e.event);
      if (jb.type == JobType::kOptimizer) {
        by_optimizer.insert(e.event);
      } else {
        in_micro_batch.insert({e.event, jb.micro_batch});
      }
    }
  }
  for (int j = 0; j < static_cast<int>(info.jobs.size()); ++j) {
    const Job& jb = job(r, j);
    for (const EventUse& e : info.jobs[j]->waits) {
      if (!Runs(r, j, e.op)) continue;
      if (jb.type == JobType::kOptimizer) {
        if (anywhere.count(e.event)) continue;
        return NotFound(Where({r, j, e.op}), ": waits on event '", e.event,
                        "', which no op of this rank records");
      }
      if (in_micro_batch.count({e.event, jb.micro_batch}) ||
          by_optimizer.count(e.event)) {
        continue;
      }
      return NotFound(Where({r, j, e.op}), ": waits on event '", e.event,
                      "', which no op of this rank records in micro-batch ",
                      jb.micro_batch, " or in the optimizer job");
    }
  }
  return Status::OK();
}

// ---- 4. Data flow -----------------------------------------------------------
Status PlanVerifier::CheckDataFlow(int r) const {
  const RankInfo& info = ranks_[r];
  VarMbSet produced;  // (var, micro-batch of the job that wrote it)
  std::unordered_set<std::string_view> by_backward;
  for (int j = 0; j < static_cast<int>(info.jobs.size()); ++j) {
    const Job& jb = job(r, j);
    const ProgramInfo& pi = *info.jobs[j];
    const bool optimizer = jb.type == JobType::kOptimizer;
    for (const VarRead& read : pi.external_reads) {
      if (!Runs(r, j, read.op)) continue;
      if (produced.count({read.var, jb.micro_batch})) continue;
      if (optimizer && by_backward.count(read.var)) continue;
      return NotFound(Where({r, j, read.op}), ": reads var '", read.var,
                      "', which is not written earlier in the program, not ",
                      "persistable or data, and not written by an earlier ",
                      "job of micro-batch ", jb.micro_batch,
                      optimizer ? " or by a backward job" : "",
                      " on this rank");
    }
    const bool backward = IsBackwardType(jb.type);
    for (const VarRead& w : pi.writes) {
      if (!Runs(r, j, w.op)) continue;
      produced.insert({w.var, jb.micro_batch});
      if (backward) by_backward.insert(w.var);
    }
  }
  return Status::OK();
}

// ---- 7. Deadlock freedom ----------------------------------------------------
// The plan that is proven is the one that runs: the plan is lowered to its
// ExecutionGraph and the simulator runs it at zero cost.
Status PlanVerifier::CheckDeadlockFreedom() {
  LOOM_ASSIGN_OR_RETURN(ExecutionGraph graph, LowerPlan(plan_));
  SimulationOptions options;
  options.metrics = false;
  LOOM_ASSIGN_OR_RETURN(SimulationResult sim, Simulate(graph, options));
  stats_.ops = sim.instructions;
  return Status::OK();
}

}  // namespace plan_verifier_internal

Status VerifyPlan(const Plan& plan, PlanVerifyStats* stats) {
  return plan_verifier_internal::PlanVerifier(plan).Run(stats);
}

}  // namespace loom
