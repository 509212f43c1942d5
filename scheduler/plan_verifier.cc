#include "scheduler/plan_verifier.h"

#include <algorithm>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "framework/op_registry.h"
#include "framework/shape_inference.h"
#include "scheduler/schedule.h"

namespace loom {

bool IsRuntimeCollective(const std::string& t) {
  return t == "allreduce" || t == "allgather" || t == "reduce_scatter" ||
         t == "broadcast" || t == "c_softmax_with_cross_entropy";
}

namespace {

// RingId values are 1..kNumRings.
constexpr int kNumRings = 4;
// How many blocked ranks a deadlock message describes.
constexpr int kMaxReportedRanks = 4;

const char* RingName(int ring) {
  switch (ring) {
    case kMpRing:
      return "mp";
    case kDpRing:
      return "dp";
    case kPpRing:
      return "pp";
    case kSharedParamRing:
      return "shared_param";
  }
  return "?";
}

enum class OpKind { kCompute, kSend, kRecv, kCollective };

struct OpInfo {
  const Op* op = nullptr;
  OpKind kind = OpKind::kCompute;
  int peer = -1;                     // send / recv: the peer's pp stage
  int ring = 0;                      // collective: its RingId
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
  std::vector<std::string_view> writes;  // each var once
  std::vector<EventUse> records;
  std::vector<EventUse> waits;
};

// One op executed by one rank: job `job` of the rank's list, op `op` of its
// program.
struct OpRef {
  int rank = 0;
  int job = 0;
  int op = 0;
};

struct VarMbHash {
  size_t operator()(const std::pair<std::string_view, int>& p) const {
    return std::hash<std::string_view>()(p.first) * 31 +
           static_cast<size_t>(p.second);
  }
};
using VarMbSet =
    std::unordered_set<std::pair<std::string_view, int>, VarMbHash>;

bool IsBackwardType(JobType t) {
  return t == JobType::kBackward || t == JobType::kBackwardB ||
         t == JobType::kBackwardW;
}

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

// An int or string attribute as text, "" when absent; for comparing the
// collective attributes that must agree across a group.
std::string AttrText(const Op& op, const std::string& name) {
  const proto::Attr* a = FindAttrOrDefault(op.desc(), name);
  if (a == nullptr) return "";
  switch (a->type()) {
    case proto::INT:
      return StrCat(a->i());
    case proto::LONG:
      return StrCat(a->l());
    case proto::STRING:
      return a->s();
    default:
      return StrCat("<", proto::AttrType_Name(a->type()), ">");
  }
}

// What a collective call must agree on across its group.
struct CollectiveCall {
  std::string type;
  int micro_batch = 0;
  std::vector<TensorMeta> inputs;
  std::string reduce_op, root, nranks;

  bool operator==(const CollectiveCall& o) const {
    return type == o.type && micro_batch == o.micro_batch &&
           inputs == o.inputs && reduce_op == o.reduce_op && root == o.root &&
           nranks == o.nranks;
  }
  std::string ToString() const {
    std::string s = StrCat(type, ", micro-batch ", micro_batch, ", inputs [");
    for (size_t i = 0; i < inputs.size(); ++i) {
      s += StrCat(i ? ", " : "", MetaToString(inputs[i]));
    }
    s += "]";
    if (!reduce_op.empty()) s += StrCat(", reduce_op ", reduce_op);
    if (!root.empty()) s += StrCat(", root ", root);
    if (!nranks.empty()) s += StrCat(", nranks ", nranks);
    return s;
  }
};

class PlanVerifier {
 public:
  explicit PlanVerifier(const Plan& plan) : plan_(plan), layout_(plan.layout) {}

  Status Run(PlanVerifyStats* stats) {
    LOOM_RETURN_IF_ERROR(CheckShape());
    ranks_.resize(plan_.ranks.size());
    for (int r = 0; r < world(); ++r) {
      LOOM_RETURN_IF_ERROR(CheckJobs(r));
      LOOM_RETURN_IF_ERROR(CheckEvents(r));
      LOOM_RETURN_IF_ERROR(CheckDataFlow(r));
    }
    CollectCommunication();
    LOOM_RETURN_IF_ERROR(CheckTransfers());
    LOOM_RETURN_IF_ERROR(CheckCollectives());
    LOOM_RETURN_IF_ERROR(Simulate());
    if (stats != nullptr) *stats = stats_;
    return Status::OK();
  }

 private:
  struct RankInfo {
    // The program of each job, in job order.
    std::vector<const ProgramInfo*> jobs;
  };

  int world() const { return layout_.world_size(); }
  const RankPlan& rank(int r) const { return plan_.ranks[r]; }
  const Job& job(int r, int j) const { return plan_.ranks[r].jobs[j]; }
  const OpInfo& op(const OpRef& ref) const {
    return ranks_[ref.rank].jobs[ref.job]->ops[ref.op];
  }

  // ---- Locations ------------------------------------------------------------
  std::string RankName(int r) const {
    return StrCat("rank ", r, " (", CoordsToString(rank(r).coords), ")");
  }
  std::string JobName(int r, int j) const {
    return JobToString(job(r, j), rank(r).num_chunks > 1);
  }
  std::string Where(int r, int j) const {
    return StrCat(RankName(r), ", job ", j, " (", JobName(r, j), ")");
  }
  std::string Where(const OpRef& ref) const {
    return StrCat(Where(ref.rank, ref.job), ": op ", ref.op, " (",
                  op(ref).op->type(), ")");
  }

  // ---- 1. The plan's shape --------------------------------------------------
  Status CheckShape() const {
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

  // ---- 2. Job lists, programs, communication attributes ---------------------
  Status CheckJobs(int r) {
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
    }
    return Status::OK();
  }

  // Classifies the ops of `program` (first run by job `j` of rank `r`, which
  // errors name) and finds its external reads, writes and events.
  Status AnalyzeProgram(int r, int j, const Program& program,
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
      if (type == "send" || type == "recv") {
        const bool send = type == "send";
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
      } else if (IsRuntimeCollective(type)) {
        oi.kind = OpKind::kCollective;
        StatusOr<int> ring = IntAttr(*op, "ring_id");
        if (!ring.ok()) return bad_attr(ring.status());
        oi.ring = *ring;
        if (oi.ring < kMpRing || oi.ring > kSharedParamRing) {
          return InvalidArgument(where(), ": ring_id ", oi.ring,
                                 " is not a known ring (", kMpRing, " mp, ",
                                 kDpRing, " dp, ", kPpRing, " pp, ",
                                 kSharedParamRing, " shared_param)");
        }
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
          if (written.insert(v).second) pi->writes.push_back(v);
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

  // ---- 3. Events
  // --------------------------------------------------------------
  Status CheckEvents(int r) const {
    const RankInfo& info = ranks_[r];
    bool any_wait = false;
    for (const ProgramInfo* pi : info.jobs) any_wait |= !pi->waits.empty();
    if (!any_wait) return Status::OK();
    VarMbSet in_micro_batch;  // (event, micro-batch)
    std::unordered_set<std::string_view> by_optimizer, anywhere;
    for (int j = 0; j < static_cast<int>(info.jobs.size()); ++j) {
      const Job& jb = job(r, j);
      for (const EventUse& e : info.jobs[j]->records) {
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

  // ---- 4. Data flow
  // -----------------------------------------------------------
  Status CheckDataFlow(int r) const {
    const RankInfo& info = ranks_[r];
    VarMbSet produced;  // (var, micro-batch of the job that wrote it)
    std::unordered_set<std::string_view> by_backward;
    for (int j = 0; j < static_cast<int>(info.jobs.size()); ++j) {
      const Job& jb = job(r, j);
      const ProgramInfo& pi = *info.jobs[j];
      const bool optimizer = jb.type == JobType::kOptimizer;
      for (const VarRead& read : pi.external_reads) {
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
      for (std::string_view w : pi.writes) {
        produced.insert({w, jb.micro_batch});
        if (backward) by_backward.insert(w);
      }
    }
    return Status::OK();
  }

  // ---- 5 and 6. Transfers and collectives
  // ------------------------------------ A channel carries the transfers from
  // one stage to one rank: both ends share dp and mp, so (receiving rank,
  // sending stage) names it.
  int Channel(int dst_rank, int src_stage) const {
    return dst_rank * layout_.pp + src_stage;
  }
  int DstRank(const OpRef& send) const {
    return layout_.RankAtStage(rank(send.rank).coords, op(send).peer);
  }

  // Which group of ring `ring` a rank with coordinates `c` belongs to, as an
  // index into groups_.
  int Group(int ring, const RankCoords& c) const {
    int local = 0;
    switch (ring) {
      case kMpRing:
        local = c.dp + layout_.dp * c.pp;
        break;
      case kDpRing:
        local = c.mp + layout_.mp * c.pp;
        break;
      default:
        local = c.dp + layout_.dp * c.mp;
        break;  // pp, shared_param
    }
    return (ring - 1) * world() + local;
  }
  std::vector<OpRef>& Sequence(int r, int ring) {
    return sequences_[r * kNumRings + ring - 1];
  }

  // Lists, in execution order, the sends and recvs of every channel and the
  // collectives of every rank and ring; forms the collective groups.
  void CollectCommunication() {
    sends_.assign(static_cast<size_t>(world()) * layout_.pp, {});
    recvs_.assign(sends_.size(), {});
    sequences_.assign(static_cast<size_t>(world()) * kNumRings, {});
    groups_.assign(static_cast<size_t>(world()) * kNumRings, {});
    for (int r = 0; r < world(); ++r) {
      const RankCoords& c = rank(r).coords;
      const RankInfo& info = ranks_[r];
      for (int j = 0; j < static_cast<int>(info.jobs.size()); ++j) {
        const std::vector<OpInfo>& ops = info.jobs[j]->ops;
        for (int k = 0; k < static_cast<int>(ops.size()); ++k) {
          const OpInfo& oi = ops[k];
          switch (oi.kind) {
            case OpKind::kSend:
              sends_[Channel(layout_.RankAtStage(c, oi.peer), c.pp)].push_back(
                  {r, j, k});
              break;
            case OpKind::kRecv:
              recvs_[Channel(r, oi.peer)].push_back({r, j, k});
              break;
            case OpKind::kCollective:
              Sequence(r, oi.ring).push_back({r, j, k});
              break;
            case OpKind::kCompute:
              break;
          }
        }
      }
      for (int ring = 1; ring <= kNumRings; ++ring) {
        if (ring == kSharedParamRing && Sequence(r, ring).empty()) continue;
        groups_[Group(ring, c)].push_back(r);  // ascending: r ascends
      }
    }
  }

  TensorMeta SendMeta(const OpRef& send) const {
    const OpInfo& oi = op(send);
    return MetaOf(*oi.op->block()->FindVar(*oi.var));
  }
  TensorMeta RecvMeta(const OpRef& recv) const {
    const Op& o = *op(recv).op;
    return TensorMeta{static_cast<DataType>(o.GetAttr<int32_t>("dtype")),
                      o.GetAttr<std::vector<int64_t>>("out_shape")};
  }

  Status CheckTransfers() {
    // Counts first: an unmatched transfer also shifts every later pairing.
    for (size_t ch = 0; ch < sends_.size(); ++ch) {
      const std::vector<OpRef>& sends = sends_[ch];
      const std::vector<OpRef>& recvs = recvs_[ch];
      if (sends.size() == recvs.size()) continue;
      const int dst = static_cast<int>(ch) / layout_.pp;
      const int src = layout_.RankAtStage(rank(dst).coords,
                                          static_cast<int>(ch) % layout_.pp);
      const std::string counts =
          StrCat("rank ", src, " sends ", sends.size(), " tensors to rank ",
                 dst, ", which receives ", recvs.size(), " from it");
      if (sends.size() > recvs.size()) {
        const OpRef& s = sends[recvs.size()];
        return InvalidArgument(Where(s), ": sends var '", *op(s).var, "' to ",
                               RankName(dst),
                               ", which never receives it: ", counts);
      }
      const OpRef& rv = recvs[sends.size()];
      return InvalidArgument(Where(rv), ": receives var '", *op(rv).var,
                             "' from ", RankName(src),
                             ", which never sends it: ", counts);
    }
    for (size_t ch = 0; ch < sends_.size(); ++ch) {
      for (size_t i = 0; i < sends_[ch].size(); ++i) {
        const OpRef& s = sends_[ch][i];
        const OpRef& rv = recvs_[ch][i];
        const std::string& var = *op(s).var;
        const int mb = job(s.rank, s.job).micro_batch;
        const TensorMeta meta = SendMeta(s);
        const std::string& rvar = *op(rv).var;
        const int rmb = job(rv.rank, rv.job).micro_batch;
        const TensorMeta rmeta = RecvMeta(rv);
        if (var == rvar && mb == rmb && meta == rmeta) continue;
        std::vector<std::string> differ;
        if (var != rvar) differ.push_back("var");
        if (mb != rmb) differ.push_back("micro-batch");
        if (meta.dtype != rmeta.dtype) differ.push_back("dtype");
        if (meta.shape != rmeta.shape) differ.push_back("shape");
        std::string what;
        for (const std::string& d : differ)
          what += (what.empty() ? "" : ", ") + d;
        return InvalidArgument(
            Where(s), ": sends var '", var, "' (micro-batch ", mb, ", ",
            MetaToString(meta), "), but its matching recv (transfer ", i,
            " of ", sends_[ch].size(), " between them), ", Where(rv),
            ", receives '", rvar, "' (micro-batch ", rmb, ", ",
            MetaToString(rmeta), "); they differ in ", what);
      }
      stats_.transfers += static_cast<int64_t>(sends_[ch].size());
    }
    return Status::OK();
  }

  CollectiveCall Call(const OpRef& ref) const {
    const Op& o = *op(ref).op;
    CollectiveCall call;
    call.type = o.type();
    call.micro_batch = job(ref.rank, ref.job).micro_batch;
    for (const auto& slot : o.desc().inputs()) {
      for (const std::string& v : slot.vars()) {
        if (!v.empty()) call.inputs.push_back(MetaOf(*o.block()->FindVar(v)));
      }
    }
    call.reduce_op = AttrText(o, "reduce_op");
    call.root = AttrText(o, "root");
    call.nranks = AttrText(o, "nranks");
    return call;
  }

  Status CheckCollectives() {
    for (int ring = 1; ring <= kNumRings; ++ring) {
      for (int g = (ring - 1) * world(); g < ring * world(); ++g) {
        const std::vector<int>& members = groups_[g];
        if (members.empty()) continue;
        const int size = static_cast<int>(members.size());
        // nranks, where an op has it, is the group's size.
        for (int m : members) {
          for (const OpRef& ref : Sequence(m, ring)) {
            const proto::Attr* n =
                FindAttrOrDefault(op(ref).op->desc(), "nranks");
            if (n != nullptr && n->type() == proto::INT && n->i() != size) {
              return InvalidArgument(Where(ref), ": attribute nranks is ",
                                     n->i(), " but its ", RingName(ring),
                                     " group has ", size, " ranks");
            }
          }
        }
        const int a = members[0];
        const std::vector<OpRef>& first = Sequence(a, ring);
        for (int i = 1; i < size; ++i) {
          const int b = members[i];
          const std::vector<OpRef>& other = Sequence(b, ring);
          const size_t n = std::min(first.size(), other.size());
          for (size_t k = 0; k < n; ++k) {
            const CollectiveCall ca = Call(first[k]);
            const CollectiveCall cb = Call(other[k]);
            if (ca == cb) continue;
            return InvalidArgument(Where(first[k]), ": collective ", k,
                                   " on ring ", RingName(ring), " (",
                                   ca.ToString(), ") does not match ",
                                   Where(other[k]), " (", cb.ToString(), ")");
          }
          if (first.size() != other.size()) {
            const bool a_longer = first.size() > other.size();
            const OpRef& extra = a_longer ? first[n] : other[n];
            return InvalidArgument(
                Where(extra), ": collective ", n, " on ring ", RingName(ring),
                " has no counterpart on ", RankName(a_longer ? b : a), ": ",
                RankName(a), " issues ", first.size(), " collectives on ring ",
                RingName(ring), " but ", RankName(b), " issues ", other.size());
          }
        }
      }
    }
    return Status::OK();
  }

  // ---- 7. Deadlock
  // ------------------------------------------------------------
  Status Simulate() {
    const int n = world();
    const int pp = layout_.pp;
    struct Cursor {
      int job = 0;
      int op = 0;
    };
    std::vector<Cursor> cursor(n);
    std::vector<int> sent(static_cast<size_t>(n) * pp, 0);
    std::vector<int> received(sent.size(), 0);
    std::vector<int> arrived(groups_.size(), 0);
    std::vector<std::vector<int>> waiting(groups_.size());
    std::vector<int> wait_channel(n, -1), wait_group(n, -1);
    std::vector<char> done(n, 0);
    std::vector<int> ready;
    ready.reserve(n);
    for (int r = n - 1; r >= 0; --r) ready.push_back(r);

    // Moves the cursor past jobs whose ops are all done.
    auto settle = [&](int r) {
      Cursor& c = cursor[r];
      const std::vector<const ProgramInfo*>& jobs = ranks_[r].jobs;
      while (c.job < static_cast<int>(jobs.size()) &&
             c.op >= static_cast<int>(jobs[c.job]->ops.size())) {
        ++c.job;
        c.op = 0;
      }
    };
    auto advance = [&](int r) {
      ++cursor[r].op;
      ++stats_.ops;
      settle(r);
    };

    while (!ready.empty()) {
      const int r = ready.back();
      ready.pop_back();
      const RankCoords& coords = rank(r).coords;
      const std::vector<const ProgramInfo*>& jobs = ranks_[r].jobs;
      settle(r);
      bool blocked = false;
      while (!blocked && cursor[r].job < static_cast<int>(jobs.size())) {
        const OpInfo& oi = jobs[cursor[r].job]->ops[cursor[r].op];
        switch (oi.kind) {
          case OpKind::kCompute:
            advance(r);
            break;
          case OpKind::kSend: {
            const int dst = layout_.RankAtStage(coords, oi.peer);
            const int ch = Channel(dst, coords.pp);
            ++sent[ch];
            if (wait_channel[dst] == ch) {
              wait_channel[dst] = -1;
              ready.push_back(dst);
            }
            advance(r);
            break;
          }
          case OpKind::kRecv: {
            const int ch = Channel(r, oi.peer);
            if (received[ch] < sent[ch]) {
              ++received[ch];
              advance(r);
            } else {
              wait_channel[r] = ch;
              blocked = true;
            }
            break;
          }
          case OpKind::kCollective: {
            const int g = Group(oi.ring, coords);
            const int size = static_cast<int>(groups_[g].size());
            if (++arrived[g] < size) {
              waiting[g].push_back(r);
              wait_group[r] = g;
              blocked = true;
              break;
            }
            // The last member arrived: everyone passes.
            ++stats_.collectives;
            arrived[g] = 0;
            for (int w : waiting[g]) {
              wait_group[w] = -1;
              advance(w);
              ready.push_back(w);
            }
            waiting[g].clear();
            advance(r);
            break;
          }
        }
      }
      if (!blocked) done[r] = 1;
    }

    std::vector<int> blocked;
    for (int r = 0; r < n; ++r) {
      if (!done[r]) blocked.push_back(r);
    }
    if (blocked.empty()) return Status::OK();

    // What blocked rank r waits for: the sender of its recv, or a member of
    // its collective's group that has not arrived.
    auto waits_for = [&](int r) {
      if (wait_channel[r] >= 0) {
        return layout_.RankAtStage(rank(r).coords, wait_channel[r] % pp);
      }
      const int g = wait_group[r];
      if (g < 0) return -1;
      for (int m : groups_[g]) {
        if (wait_group[m] != g) return m;
      }
      return -1;
    };
    auto describe = [&](int r) {
      const Cursor& c = cursor[r];
      const OpInfo& oi = ranks_[r].jobs[c.job]->ops[c.op];
      std::string what;
      if (oi.kind == OpKind::kRecv) {
        what = StrCat("recv from stage ", oi.peer, ", var ", *oi.var);
      } else {
        const int g = wait_group[r];
        what = StrCat(oi.op->type(), " on ring ", RingName(oi.ring), ", ",
                      g >= 0 ? arrived[g] : 0, " of ",
                      g >= 0 ? groups_[g].size() : 0, " ranks arrived");
      }
      return StrCat(RankName(r), " waits at job ", c.job, " (",
                    JobName(r, c.job), ") op ", c.op, " (", what, ")");
    };
    // Follow the chain of waits from the lowest blocked rank.
    std::string msg = "deadlock: ";
    std::vector<char> listed(n, 0);
    int r = blocked[0];
    int reported = 0;
    while (r >= 0 && !done[r] && !listed[r] && reported < kMaxReportedRanks) {
      msg += StrCat(reported ? "; " : "", describe(r));
      listed[r] = 1;
      ++reported;
      r = waits_for(r);
    }
    if (static_cast<int>(blocked.size()) > reported) {
      msg += StrCat("; ", blocked.size(), " of ", n, " ranks blocked in all");
    }
    return FailedPrecondition(msg);
  }

  const Plan& plan_;
  const ParallelLayout& layout_;
  std::vector<RankInfo> ranks_;
  std::unordered_map<const Program*, std::unique_ptr<ProgramInfo>> programs_;
  std::vector<std::vector<OpRef>> sends_, recvs_;  // by channel
  std::vector<std::vector<OpRef>> sequences_;      // by rank and ring
  std::vector<std::vector<int>> groups_;           // members, by group
  PlanVerifyStats stats_;
};

}  // namespace

Status VerifyPlan(const Plan& plan, PlanVerifyStats* stats) {
  return PlanVerifier(plan).Run(stats);
}

}  // namespace loom
