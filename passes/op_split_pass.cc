// op-split: a forward op whose tensor-parallel all-reduce would wait for
// all of it is cut into k parts along a row dimension (batch or sequence),
// each part with its own all-reduce on the mp stream:
//
//   split(X) -> X_0..X_k-1;  op(X_i) -> P_i;  allreduce(P_i) -> R_i;
//   concat(R_0..R_k-1) -> R
//
// Part i's all-reduce then runs while part i+1 computes, so only the last
// part's all-reduce is exposed (or, when communication is the longer of the
// two, only the first part's compute). The ops split are row-wise: a
// row-parallel matmul on the rows of X, the vocabulary-parallel embedding
// on its token ids. Rows are independent in them and in the all-reduce's
// sum, so every element of R is computed exactly as before: training
// numbers do not change. The split's parts view X and the parts' all-reduces
// write R in place (op_view.h), so nothing is copied. Only those two op
// types are split, and a part's rows are joined again before anything else
// reads them, so no dropout ever runs on a part: its mask, keyed on global
// rows (framework/ops/dropout.cc), needs no row offset from this pass.
//
// k is chosen by cost: each candidate split (axis, k) is priced on the
// context's cost model as a two-stage pipeline, k parts of compute beside
// k all-reduces, against the unsplit pair. Smaller GEMMs run less
// efficiently and every all-reduce pays the link's latency, so the model,
// not a constant, says when to stop. An overlap schedule already hides a
// forward's all-reduces under the backward beside it in its steady phase;
// there a split saves nothing, so the time it saves counts only in the
// forwards the schedule runs whole (warm-up, cool-down).
//
// Under sequence parallelism the reduction is a reduce-scatter along the
// sequence: parts then split another row dim (the batch), each part's
// reduce-scatter gives this rank its run of the sequence for those rows,
// and the concat joins them as the unsplit one would have.
//
// Only rows: parts of a contracted dim (an MLP's hidden dim) are partial
// sums, each all-reduced whole, so the last part's full all-reduce stays
// exposed and k parts move k times the bytes (docs/performance.md,
// "1F1B-overlap and op-split").
#include <algorithm>
#include <cmath>
#include <memory>
#include <map>
#include <optional>

#include "cost_model/cluster.h"
#include "cost_model/comm_model.h"
#include "framework/op_builder.h"
#include "framework/op_work.h"
#include "framework/shape_inference.h"
#include "passes/comm_ops.h"
#include "passes/parallel_passes.h"
#include "scheduler/schedule.h"

namespace loom {
namespace {

constexpr const char* kPassName = "op-split";

// The row-wise op and the tensor-parallel all-reduce that waits for it.
struct Candidate {
  Op* op;
  Op* allreduce;
};

// The input whose rows a row-wise op maps to its output's rows, and how
// many of its leading dims are rows (dims past them are contracted or
// gathered whole); empty for other ops.
struct RowInput {
  const char* slot = nullptr;
  int row_dims = 0;
};
RowInput RowInputOf(const Block& block, const Op& op) {
  const char* slot = nullptr;
  int trailing = 0;
  if (op.type() == "matmul" && !op.GetAttr<bool>("transpose_x")) {
    slot = "X";
    trailing = 1;  // the contracted dim
  } else if (op.type() == "lookup_table") {
    slot = "Ids";
  }
  if (slot == nullptr) return {};
  const proto::VarDesc* x = block.FindVar(op.Input(slot));
  if (x == nullptr) return {};
  return {slot, x->shape_size() - trailing};
}

// Whether `op` sums partial products over the mp ring: tensor
// parallelism's all-reduce, or sequence parallelism's reduce-scatter.
bool IsMpReduction(const Op& op) {
  return (op.type() == "allreduce" || op.type() == "reduce_scatter") &&
         op.GetAttr<int32_t>("ring_id") == kMpRing;
}

// A row-wise op whose output only an mp reduction off calc reads.
std::optional<Candidate> ReductionOf(const Block& block, Op* op) {
  if (RowInputOf(block, *op).row_dims < 1) return std::nullopt;
  const std::string out = op->Output("Out");
  const std::vector<Op*>& readers = block.Consumers(out);
  if (readers.size() != 1 || block.Producers(out).size() != 1) return std::nullopt;
  Op* ar = readers[0];
  if (!IsMpReduction(*ar)) return std::nullopt;
  if (stream::IsCalc(ar->desc().stream())) return std::nullopt;
  return Candidate{op, ar};
}

// The same, for a forward op.
std::optional<Candidate> CandidateAt(const Block& block, Op* op) {
  if (!op->HasRole(role::kForward) || op->HasRole(role::kBackward)) return std::nullopt;
  return ReductionOf(block, op);
}

// Seconds of the pair, unsplit or in parts.
struct SplitTiming {
  int axis = -1;
  int parts = 1;
  double compute = 0;    // one part's op
  double allreduce = 0;  // one part's all-reduce
  double copies = 0;     // the split and the concat
  // Split, then k parts on calc beside k all-reduces on mp (each waits for
  // its part and the one before it), then the concat.
  double Total() const {
    return copies + compute + allreduce + (parts - 1) * std::max(compute, allreduce);
  }
  // Seconds saved per forward, over the forwards where the all-reduce is
  // exposed (OpSplitPass::Choose).
  double saving = 0;
};

// Of this rank's forwards, how many `schedule` runs whole (not part by
// part beside a backward), and how many there are.
StatusOr<std::pair<int, int>> WholeForwards(const PassContext& ctx, const ScheduleInfo& schedule,
                                            int max_in_flight) {
  const int m = ctx.micro_batches() * std::max(1, ctx.vpp_degree());
  if (!schedule.splits_jobs) return std::make_pair(m, m);
  ScheduleParams params{ctx.coords().pp, std::max(1, ctx.pp_degree()), ctx.micro_batches(),
                        std::max(1, ctx.vpp_degree())};
  params.max_in_flight = max_in_flight;
  params.forward_cuts = params.backward_cuts = {1};  // any cut: only whole-or-not matters
  LOOM_ASSIGN_OR_RETURN(std::vector<Job> jobs, schedule.fn(params));
  int whole = 0;
  for (const Job& j : jobs) whole += j.type == JobType::kForward && j.whole();
  return std::make_pair(whole, m);
}

// "65.65 ms", "12.3 us": three or four digits either way.
std::string Ms(double s) {
  if (std::fabs(s) < 1e-3) return StrCat(std::round(s * 1e7) / 10, " us");
  return StrCat(std::round(s * 1e5) / 100, " ms");
}

std::string PartName(const std::string& reduced, int i, const char* what) {
  return StrCat(reduced, "@PART", i, what);
}

proto::OpDesc PlacedBeside(proto::OpDesc d, const Op& anchor) {
  d.set_pipeline_stage(anchor.desc().pipeline_stage());
  d.set_chunk(anchor.desc().chunk());
  d.set_layer(anchor.desc().layer());
  d.set_creation_pass(kPassName);
  return d;
}

// A copy of `desc` as a new op reading `rows` in slot `slot` and writing
// `out` in place of its Out.
proto::OpDesc WithRowsAndOut(proto::OpDesc d, const std::string& slot, const std::string& rows,
                             const std::string& out) {
  d.set_id(0);
  d.clear_param_grads();
  d.set_creation_pass(kPassName);
  for (auto& s : *d.mutable_inputs()) {
    if (s.name() == slot) s.set_vars(0, rows);
  }
  for (auto& s : *d.mutable_outputs()) {
    if (s.name() == "Out") s.set_vars(0, out);
  }
  return d;
}

struct OpSplitOptions {
  int64_t parts = 0;  // 0: by cost
  int64_t max_parts = 16;
  // The schedule the plan runs and its cap, which say in which forwards
  // an all-reduce is exposed (the schedule pass runs later).
  const ScheduleInfo* schedule = DefaultSchedule();
  int64_t max_in_flight = 0;
};

class OpSplitPass : public Pass {
 public:
  explicit OpSplitPass(const OpSplitOptions& options)
      : parts_(options.parts),
        max_parts_(options.max_parts),
        schedule_(options.schedule),
        max_in_flight_(static_cast<int>(options.max_in_flight)) {}
  StatusOr<bool> Run(PassContext& ctx) override;

 private:
  // The split of `c` into `parts` along `axis` (1 part: as it is), priced
  // on a scratch copy of the pair (the real block is not touched).
  StatusOr<SplitTiming> Price(const Block& block, const Candidate& c, int axis, int parts) const;
  // The cheapest split of `c` (or the forced one), with the pair unsplit.
  StatusOr<std::pair<SplitTiming, SplitTiming>> Choose(const Block& block,
                                                       const Candidate& c) const;
  Status Rewrite(Block& block, const Candidate& c, int axis, int parts) const;

  int64_t parts_;
  int64_t max_parts_;
  const ScheduleInfo* schedule_;
  int max_in_flight_;
  const OpCostEstimator* ops_ = nullptr;
  const CommModel* comm_ = nullptr;
  std::vector<int> mp_group_;
  // The share of forwards in which the all-reduce a split hides would
  // otherwise be exposed.
  double exposed_share_ = 1;
};

StatusOr<SplitTiming> OpSplitPass::Price(const Block& block, const Candidate& c, int axis,
                                         int parts) const {
  Program scratch;
  Block& b = scratch.global_block();
  for (const Op* op : {c.op, c.allreduce}) {
    for (const std::string& v : op->InputVars()) *b.AddVar(v) = *block.FindVar(v);
    for (const std::string& v : op->OutputVars()) *b.AddVar(v) = *block.FindVar(v);
  }
  const Candidate copy{b.AppendOp(c.op->desc()), b.AppendOp(c.allreduce->desc())};
  if (parts > 1) LOOM_RETURN_IF_ERROR(Rewrite(b, copy, axis, parts));
  SplitTiming t;
  t.axis = axis;
  t.parts = parts;
  // The first part and its all-reduce stand for every part's; the split
  // and the concat are the copies (nothing, as a view and a join).
  bool computed = false, reduced = false;
  for (const Op* op : b.ops()) {
    if (IsMpReduction(*op)) {
      if (reduced) continue;
      LOOM_ASSIGN_OR_RETURN(t.allreduce, comm_->OpCommSeconds(op->type(), WorkOf(*op),
                                                              CommAlgorithm::kDirect, mp_group_));
      reduced = true;
      continue;
    }
    const bool part = op->type() == c.op->type();
    if (part && computed) continue;
    LOOM_ASSIGN_OR_RETURN(OpCost cost, ops_->EstimateOp(*op));
    (part ? t.compute : t.copies) += cost.seconds;
    computed = computed || part;
  }
  return t;
}

StatusOr<std::pair<SplitTiming, SplitTiming>> OpSplitPass::Choose(const Block& block,
                                                                  const Candidate& c) const {
  auto saving = [&](const SplitTiming& whole, const SplitTiming& t) {
    return exposed_share_ * (whole.Total() - (t.Total() - t.copies)) - t.copies;
  };
  LOOM_ASSIGN_OR_RETURN(SplitTiming whole, Price(block, c, -1, 1));
  SplitTiming best = whole;
  const RowInput rows = RowInputOf(block, *c.op);
  const proto::VarDesc& x = *block.FindVar(c.op->Input(rows.slot));
  // A reduce-scatter gives each rank a run of one dim (the sequence):
  // parts along it would give a rank runs of every part.
  const int scattered =
      c.allreduce->type() == "reduce_scatter" ? c.allreduce->GetAttr<int32_t>("axis") : -1;
  for (int axis = 0; axis < rows.row_dims; ++axis) {
    if (axis == scattered) continue;
    const int64_t dim = x.shape(axis);
    const int64_t lo = parts_ > 0 ? parts_ : 2;
    const int64_t hi = parts_ > 0 ? parts_ : std::min<int64_t>(max_parts_, dim);
    for (int64_t k = lo; k <= hi; ++k) {
      if (dim % k != 0) continue;
      LOOM_ASSIGN_OR_RETURN(SplitTiming t, Price(block, c, axis, static_cast<int>(k)));
      // A forced part count takes the first axis it divides.
      if (parts_ > 0 ? best.parts == 1 : saving(whole, t) > saving(whole, best)) best = t;
    }
  }
  best.saving = saving(whole, best);
  return std::make_pair(whole, best);
}

Status OpSplitPass::Rewrite(Block& block, const Candidate& c, int axis, int parts) const {
  Op* op = c.op;
  Op* ar = c.allreduce;
  const char* slot = RowInputOf(block, *op).slot;
  const std::string x = op->Input(slot);
  const std::string partial = op->Output("Out");
  const std::string reduced = ar->Output("Out");
  std::vector<std::string> xs, ps, rs;
  for (int i = 0; i < parts; ++i) {
    xs.push_back(PartName(reduced, i, ".rows"));
    ps.push_back(PartName(reduced, i, ".partial"));
    rs.push_back(PartName(reduced, i, ""));
  }
  proto::OpDesc split = OpDescBuilder("split")
                            .Input("X", x)
                            .Output("Out", xs)
                            .Attr("axis", axis)
                            .Attr("num", parts)
                            .Role(op->role())
                            .Build();
  LOOM_RETURN_IF_ERROR(InsertOpInferShapes(block, op, PlacedBeside(split, *op)).status());
  // Part 0 keeps the original ops (and their ids); parts 1.. are copies.
  const proto::OpDesc op_desc = op->desc();
  const proto::OpDesc ar_desc = ar->desc();
  const Op* last = ar;
  for (int i = 1; i < parts; ++i) {
    LOOM_ASSIGN_OR_RETURN(Op* part, InsertOpAfterInferShapes(
                                        block, last, WithRowsAndOut(op_desc, slot, xs[i], ps[i])));
    LOOM_ASSIGN_OR_RETURN(last, InsertOpAfterInferShapes(
                                    block, part, WithRowsAndOut(ar_desc, "X", ps[i], rs[i])));
  }
  for (auto [name, like] : {std::make_pair(ps[0], ps[1]), std::make_pair(rs[0], rs[1])}) {
    *block.AddVar(name) = *block.FindVar(like);
    block.FindVar(name)->set_name(name);
  }
  block.RenameInput(op, x, xs[0]);
  block.RenameOutput(op, partial, ps[0]);
  block.RenameInput(ar, partial, ps[0]);
  block.RenameOutput(ar, reduced, rs[0]);
  block.RemoveVar(partial);
  proto::OpDesc concat =
      OpDescBuilder("concat").Input("X", rs).Output("Out", reduced).Attr("axis", axis).Role(
          op->role()).Build();
  return InsertOpAfterInferShapes(block, last, PlacedBeside(concat, *op)).status();
}

StatusOr<bool> OpSplitPass::Run(PassContext& ctx) {
  // Without a cluster the local preset prices the ops, by roofline.
  LOOM_ASSIGN_OR_RETURN(ops_, ctx.CostModelOrLocal());
  LOOM_ASSIGN_OR_RETURN(comm_, ctx.CommModelOrLocal());
  ctx.resolved().set_op_split(true);
  ctx.resolved().set_op_split_parts(static_cast<int32_t>(parts_));
  mp_group_ = RingMembers(ctx.layout(), ctx.rank(), kMpRing);
  if (mp_group_.size() < 2) {
    ctx.Explain(kPassName, "mp.degree is 1: no tensor-parallel all-reduce to hide");
    return false;
  }
  LOOM_ASSIGN_OR_RETURN(auto whole_forwards, WholeForwards(ctx, *schedule_, max_in_flight_));
  exposed_share_ = static_cast<double>(whole_forwards.first) / whole_forwards.second;
  if (whole_forwards.first < whole_forwards.second) {
    ctx.Explain(kPassName, StrCat(schedule_->name, " runs ", whole_forwards.first, " of this "
                                  "stage's ", whole_forwards.second, " forwards whole; the others "
                                  "beside a backward that hides their all-reduces already"));
  }
  Block& block = ctx.program().global_block();
  std::vector<Candidate> candidates;
  // The recompute pass's copy of a forward op, by the op's id: split as the
  // op is, so that the backward sees the forward's very bits.
  std::map<int64_t, Candidate> copies;
  for (Op* op : block.OpVector()) {
    if (auto c = CandidateAt(block, op)) candidates.push_back(*c);
    if (op->desc().creation_pass() == "recompute" && op->desc().forward_id() > 0) {
      if (auto c = ReductionOf(block, op)) copies.emplace(op->desc().forward_id(), *c);
    }
  }
  // Layers repeat: the choice for a signature pair is made once.
  std::map<std::string, std::pair<SplitTiming, SplitTiming>> chosen;
  int split = 0;
  for (const Candidate& c : candidates) {
    const std::string key = OpSignature(*c.op) + " | " + OpSignature(*c.allreduce);
    auto it = chosen.find(key);
    if (it == chosen.end()) {
      LOOM_ASSIGN_OR_RETURN(auto choice, Choose(block, c));
      it = chosen.emplace(key, choice).first;
    }
    const auto& [whole, best] = it->second;
    const std::string what = StrCat(c.op->Location(), " -> ", c.allreduce->Output("Out"), ": ",
                                    c.op->type(), " ", Ms(whole.compute), " then all-reduce ",
                                    Ms(whole.allreduce), " (", Ms(whole.Total()), ")");
    if (best.parts == 1) {
      ctx.Explain(kPassName,
                  StrCat(what, "; not split: ",
                         parts_ > 0 ? "no row dim divisible by the parts"
                                    : "no part count saves time once its copies are paid"));
      continue;
    }
    ctx.Explain(kPassName,
                StrCat(what, "; split into ", best.parts, " parts on dim ", best.axis,
                       parts_ > 0 ? " (parts option)" : "", ": ", Ms(best.compute),
                       " beside all-reduce ", Ms(best.allreduce), " each, copies ",
                       Ms(best.copies), ", modeled ", Ms(best.Total()), ", saving ",
                       Ms(best.saving), " a forward"));
    Status s = Rewrite(block, c, best.axis, best.parts);
    auto copy = copies.find(c.op->id());
    if (s.ok() && copy != copies.end()) s = Rewrite(block, copy->second, best.axis, best.parts);
    if (!s.ok()) return s.WithContext(c.op->Location());
    ++split;
  }
  ctx.Explain(kPassName, StrCat("split ", split, " of ", candidates.size(),
                                " ops that feed a tensor-parallel all-reduce"));
  return split > 0;
}

}  // namespace

PassInfo OpSplitPassInfo() {
  using O = OpSplitOptions;
  PassInfo info = PassInfoOf<OpSplitPass, O>(
      kPassName,
      "splits a forward matmul or embedding into row parts, each with its own tensor-parallel "
      "all-reduce, so that the all-reduces overlap the compute; parts chosen by cost");
  info.options = {
      IntOption(&O::parts, "parts", "split every candidate into this many parts (0: by cost)", 0,
                1024),
      IntOption(&O::max_parts, "max-parts", "the most parts the cost search tries", 2, 1024),
      EnumOption(&O::schedule, "schedule", "the pipeline schedule the plan runs",
                 ScheduleChoices()),
      IntOption(&O::max_in_flight, "max-in-flight", "that schedule's max-in-flight", 0,
                kMaxWorldSize)};
  info.check = OptionsCheck<O>([](const O& o) -> Status {
    if (o.parts == 1) {
      return InvalidArgument("option parts: expected 0 (by cost) or 2..1024, got 1");
    }
    return Status::OK();
  });
  info.requires_passes = {"tensor-parallel"};
  return info;
}

}  // namespace loom
