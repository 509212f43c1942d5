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
// and the concat joins them as the unsplit one would have. The column side
// is the mirror: a column-parallel matmul waits for the all-gather of its
// sequence-split input, so the input's batch rows are split, and part i's
// GEMM runs while part i+1 is gathered:
//
//   split(X) -> X_0..X_k-1;  allgather(X_i) -> G_i;  op(G_i) -> Y_i;
//   concat(Y_0..Y_k-1) -> Y
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

// A row-wise op and the tensor-parallel collective beside it: the
// reduction that waits for its output, or (gathers_first) the all-gather
// of its input that it waits for.
struct Candidate {
  Op* op;
  Op* collective;
  bool gathers_first = false;
  // The pair in the order data flows through it.
  Op* first() const { return gathers_first ? collective : op; }
  Op* second() const { return gathers_first ? op : collective; }
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

bool IsMpGather(const Op& op) {
  return op.type() == "allgather" && op.GetAttr<int32_t>("ring_id") == kMpRing;
}

// A row-wise op whose output only an mp reduction off calc reads, or whose
// row input only an mp all-gather off calc writes and only it reads.
std::optional<Candidate> CollectiveBeside(const Block& block, Op* op) {
  const RowInput rows = RowInputOf(block, *op);
  if (rows.row_dims < 1) return std::nullopt;
  const std::string out = op->Output("Out");
  const std::vector<Op*>& readers = block.Consumers(out);
  if (readers.size() == 1 && block.Producers(out).size() == 1 && IsMpReduction(*readers[0]) &&
      !stream::IsCalc(readers[0]->desc().stream())) {
    return Candidate{op, readers[0]};
  }
  const std::string in = op->Input(rows.slot);
  const std::vector<Op*>& writers = block.Producers(in);
  if (writers.size() == 1 && block.Consumers(in).size() == 1 && IsMpGather(*writers[0]) &&
      !stream::IsCalc(writers[0]->desc().stream())) {
    return Candidate{op, writers[0], /*gathers_first=*/true};
  }
  return std::nullopt;
}

// The same, for a forward op.
std::optional<Candidate> CandidateAt(const Block& block, Op* op) {
  if (!op->HasRole(role::kForward) || op->HasRole(role::kBackward)) return std::nullopt;
  return CollectiveBeside(block, op);
}

// Seconds of the pair, unsplit or in parts.
struct SplitTiming {
  int axis = -1;
  int parts = 1;
  double compute = 0;     // one part's op
  double collective = 0;  // one part's collective
  double copies = 0;      // the split and the concat
  // Split, then k parts on calc beside k collectives on mp (each waits for
  // its part, or its part for it, and for the one before it), then the
  // concat.
  double Total() const {
    return copies + compute + collective + (parts - 1) * std::max(compute, collective);
  }
  // Seconds saved per forward, over the forwards where the collective is
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
  int64_t max_parts = kOpSplitMaxParts;
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
  // The share of forwards in which the collective a split hides would
  // otherwise be exposed.
  double exposed_share_ = 1;
};

StatusOr<SplitTiming> OpSplitPass::Price(const Block& block, const Candidate& c, int axis,
                                         int parts) const {
  Program scratch;
  Block& b = scratch.global_block();
  for (const Op* op : {c.first(), c.second()}) {
    for (const std::string& v : op->InputVars()) *b.AddVar(v) = *block.FindVar(v);
    for (const std::string& v : op->OutputVars()) *b.AddVar(v) = *block.FindVar(v);
  }
  Op* first = b.AppendOp(c.first()->desc());
  Op* second = b.AppendOp(c.second()->desc());
  const Candidate copy = c.gathers_first ? Candidate{second, first, true}
                                         : Candidate{first, second};
  if (parts > 1) LOOM_RETURN_IF_ERROR(Rewrite(b, copy, axis, parts));
  SplitTiming t;
  t.axis = axis;
  t.parts = parts;
  // The first part and its collective stand for every part's; the split
  // and the concat are the copies (nothing, as a view and a join).
  bool computed = false, communicated = false;
  for (const Op* op : b.ops()) {
    if (op->type() == c.collective->type()) {
      if (communicated) continue;
      LOOM_ASSIGN_OR_RETURN(t.collective, comm_->OpCommSeconds(op->type(), WorkOf(*op),
                                                               CommAlgorithm::kDirect, mp_group_));
      communicated = true;
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
  // A reduce-scatter gives each rank a run of one dim (the sequence), and
  // an all-gather takes one: parts along it would give or take a rank's
  // runs of every part.
  const int sequence =
      c.collective->type() == "allreduce" ? -1 : c.collective->GetAttr<int32_t>("axis");
  for (int axis = 0; axis < rows.row_dims; ++axis) {
    if (axis == sequence) continue;
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

// Both directions are one chain, first(X) -> M, second(M) -> Y, cut into
// parts along `axis` of X: split X, each part through both ops, concat Y.
Status OpSplitPass::Rewrite(Block& block, const Candidate& c, int axis, int parts) const {
  Op* first = c.first();
  Op* second = c.second();
  const char* row_slot = RowInputOf(block, *c.op).slot;
  const char* first_slot = c.gathers_first ? "X" : row_slot;
  const char* second_slot = c.gathers_first ? row_slot : "X";
  const std::string x = first->Input(first_slot);
  const std::string middle = first->Output("Out");
  const std::string y = second->Output("Out");
  const char* middle_suffix = c.gathers_first ? ".gathered" : ".partial";
  std::vector<std::string> xs, ms, ys;
  for (int i = 0; i < parts; ++i) {
    xs.push_back(PartName(y, i, ".rows"));
    ms.push_back(PartName(y, i, middle_suffix));
    ys.push_back(PartName(y, i, ""));
  }
  proto::OpDesc split = OpDescBuilder("split")
                            .Input("X", x)
                            .Output("Out", xs)
                            .Attr("axis", axis)
                            .Attr("num", parts)
                            .Role(c.op->role())
                            .Build();
  LOOM_RETURN_IF_ERROR(InsertOpInferShapes(block, first, PlacedBeside(split, *c.op)).status());
  // Part 0 keeps the original ops (and their ids); parts 1.. are copies.
  const proto::OpDesc first_desc = first->desc();
  const proto::OpDesc second_desc = second->desc();
  const Op* last = second;
  for (int i = 1; i < parts; ++i) {
    LOOM_ASSIGN_OR_RETURN(
        Op* part,
        InsertOpAfterInferShapes(block, last, WithRowsAndOut(first_desc, first_slot, xs[i], ms[i])));
    LOOM_ASSIGN_OR_RETURN(last, InsertOpAfterInferShapes(
                                    block, part,
                                    WithRowsAndOut(second_desc, second_slot, ms[i], ys[i])));
  }
  for (auto [name, like] : {std::make_pair(ms[0], ms[1]), std::make_pair(ys[0], ys[1])}) {
    *block.AddVar(name) = *block.FindVar(like);
    block.FindVar(name)->set_name(name);
  }
  block.RenameInput(first, x, xs[0]);
  block.RenameOutput(first, middle, ms[0]);
  block.RenameInput(second, middle, ms[0]);
  block.RenameOutput(second, y, ys[0]);
  block.RemoveVar(middle);
  proto::OpDesc concat =
      OpDescBuilder("concat").Input("X", ys).Output("Out", y).Attr("axis", axis).Role(
          c.op->role()).Build();
  return InsertOpAfterInferShapes(block, last, PlacedBeside(concat, *c.op)).status();
}

// "all-reduce", "reduce-scatter", "all-gather".
std::string CollectiveName(const Op& op) {
  if (op.type() == "allreduce") return "all-reduce";
  if (op.type() == "allgather") return "all-gather";
  return "reduce-scatter";
}

StatusOr<bool> OpSplitPass::Run(PassContext& ctx) {
  ctx.resolved().set_op_split(true);
  ctx.resolved().set_op_split_parts(static_cast<int32_t>(parts_));
  mp_group_ = RingMembers(ctx.layout(), ctx.rank(), kMpRing);
  if (mp_group_.size() < 2) {
    ctx.Explain(kPassName, "mp.degree is 1: no tensor-parallel collective to hide");
    return false;
  }
  LOOM_ASSIGN_OR_RETURN(const CostContext* costs, ctx.CostsFor("choosing the parts of a split"));
  ops_ = &costs->ops();
  comm_ = &costs->comm();
  LOOM_ASSIGN_OR_RETURN(auto whole_forwards, WholeForwards(ctx, *schedule_, max_in_flight_));
  exposed_share_ = static_cast<double>(whole_forwards.first) / whole_forwards.second;
  if (whole_forwards.first < whole_forwards.second) {
    ctx.Explain(kPassName, StrCat(schedule_->name, " runs ", whole_forwards.first, " of this "
                                  "stage's ", whole_forwards.second, " forwards whole; the others "
                                  "beside a backward that hides their collectives already"));
  }
  Block& block = ctx.program().global_block();
  std::vector<Candidate> candidates;
  // The recompute pass's copy of a forward op, by the op's id: split as the
  // op is, so that the backward sees the forward's very bits.
  std::map<int64_t, Candidate> copies;
  for (Op* op : block.OpVector()) {
    if (auto c = CandidateAt(block, op)) candidates.push_back(*c);
    if (op->desc().creation_pass() == "recompute" && op->desc().forward_id() > 0) {
      if (auto c = CollectiveBeside(block, op)) copies.emplace(op->desc().forward_id(), *c);
    }
  }
  // Layers repeat: the choice for a signature pair is made once.
  std::map<std::string, std::pair<SplitTiming, SplitTiming>> chosen;
  int split = 0;
  for (const Candidate& c : candidates) {
    const std::string key = OpSignature(*c.op) + " | " + OpSignature(*c.collective);
    auto it = chosen.find(key);
    if (it == chosen.end()) {
      LOOM_ASSIGN_OR_RETURN(auto choice, Choose(block, c));
      it = chosen.emplace(key, choice).first;
    }
    const auto& [whole, best] = it->second;
    const std::string comm = CollectiveName(*c.collective);
    const std::string what =
        c.gathers_first
            ? StrCat(c.op->Location(), " <- ", c.collective->Input("X"), ": ", comm, " ",
                     Ms(whole.collective), " then ", c.op->type(), " ", Ms(whole.compute), " (",
                     Ms(whole.Total()), ")")
            : StrCat(c.op->Location(), " -> ", c.collective->Output("Out"), ": ", c.op->type(),
                     " ", Ms(whole.compute), " then ", comm, " ", Ms(whole.collective), " (",
                     Ms(whole.Total()), ")");
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
                       " beside ", comm, " ", Ms(best.collective), " each, copies ",
                       Ms(best.copies), ", modeled ", Ms(best.Total()), ", saving ",
                       Ms(best.saving), " a forward"));
    Status s = Rewrite(block, c, best.axis, best.parts);
    auto copy = copies.find(c.op->id());
    if (s.ok() && copy != copies.end()) s = Rewrite(block, copy->second, best.axis, best.parts);
    if (!s.ok()) return s.WithContext(c.op->Location());
    ++split;
  }
  ctx.Explain(kPassName, StrCat("split ", split, " of ", candidates.size(),
                                " ops beside a tensor-parallel collective"));
  return split > 0;
}

}  // namespace

PassInfo OpSplitPassInfo() {
  using O = OpSplitOptions;
  PassInfo info = PassInfoOf<OpSplitPass, O>(
      kPassName,
      "splits a forward matmul or embedding into row parts, each with its own tensor-parallel "
      "collective (the all-reduce or reduce-scatter after it, the all-gather before it), so "
      "that the collectives overlap the compute; parts chosen by cost");
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
