// grad-clip: global-norm gradient clipping on one rank's program
// (framework/grad_clip.h), derived from the parameter updates the other
// passes left, so that it sees gradients where they finally live.
//
// The norm is the serial program's: each gradient element of the model
// counted once. A rank sums the squares of what it holds and the sums meet
// in all-reduces over the rings that split the model's gradients:
//   - the mp ring: a tensor-parallel shard is counted by its rank; a
//     parameter every mp rank holds whole (a layer norm's, a row-parallel
//     bias) only by mp rank 0;
//   - the pp ring: each stage counts its own parameters; the tied
//     embedding, which the first and last stage both update, only stage 0;
//   - a ZeRO part's ring (sharding): each rank counts its part of each
//     bucket, the members above excluded by element range.
// Data-parallel replicas hold the same averaged gradients and are not
// summed. The reductions run in that fixed order, so reruns agree bitwise.
//
// The section goes before the first update. Gradient writers the other
// passes placed after it (the tied embedding's all-reduce across stages,
// which sits just before its update) move up with it, before the section.
#include <algorithm>
#include <map>
#include <set>

#include "framework/grad_clip.h"
#include "framework/shape_inference.h"
#include "passes/comm_ops.h"
#include "passes/parallel_passes.h"

namespace loom {
namespace {

constexpr const char* kPassName = "grad-clip";

struct GradClipOptions {
  float max_norm = 0;
  bool loss_scaling = false;
  int64_t growth_interval = 2000;
  float init_loss_scale = 65536;
};

class GradClipPass : public Pass {
 public:
  explicit GradClipPass(const GradClipOptions& options) {
    scaling_.max_norm = options.max_norm;
    scaling_.loss_scaling = options.loss_scaling;
    scaling_.growth_interval = options.growth_interval;
    scaling_.init_loss_scale = options.init_loss_scale;
  }
  StatusOr<bool> Run(PassContext& ctx) override;

 private:
  GradScaling scaling_;
};

// Which parameters this rank counts in the norm.
class NormCounting {
 public:
  NormCounting(const Block& block, const ParallelLayout& layout, const RankCoords& coords)
      : block_(block), mp_rank0_(layout.mp == 1 || coords.mp == 0), stage0_(coords.pp == 0) {
    for (const Op* op : block.ops()) {
      if (op->type() != "allreduce" || op->GetAttr<int32_t>("ring_id") != kSharedParamRing) {
        continue;
      }
      for (const std::string& g : op->InputVars()) shared_grads_.insert(g);
    }
  }

  // `param`, with gradient `grad`: counted here?
  bool Counts(const std::string& param, const std::string& grad) const {
    const proto::VarDesc* p = block_.FindVar(param);
    if (p != nullptr && p->mp_axis() < 0 && !mp_rank0_) return false;
    if (shared_grads_.count(grad) && !stage0_) return false;
    return true;
  }

 private:
  const Block& block_;
  bool mp_rank0_, stage0_;
  std::set<std::string> shared_grads_;  // all-reduced across the tied stages
};

// The members of each flat buffer (persistable vars viewing it whole, not
// parts), by offset, found in one pass over the block's vars: updates ask
// for their buffers' members one by one.
class BufferMembers {
 public:
  explicit BufferMembers(const Block& block) {
    for (const auto& [name, var] : block.vars()) {
      if (var.has_flat() && var.flat().shard_ring() < 0) {
        members_[var.flat().buffer()][var.flat().offset()] = &var;
      }
    }
  }
  const std::map<int64_t, const proto::VarDesc*>& Of(const std::string& buffer) const {
    static const std::map<int64_t, const proto::VarDesc*> kNone;
    auto it = members_.find(buffer);
    return it == members_.end() ? kNone : it->second;
  }

 private:
  std::map<std::string, std::map<int64_t, const proto::VarDesc*>> members_;
};

// Whether `update` updates a ZeRO part: its parameter is the rank's part of
// a flat buffer (sharding_pass.cc); its gradient is then the same part of
// the gradient buffer, a view of it (stage 1) or a var of its own (stage 2).
bool UpdatesAPart(const Block& block, const Op& update) {
  const proto::VarDesc* param = block.FindVar(update.Input("Param"));
  return param != nullptr && param->has_flat() && param->flat().shard_ring() >= 0;
}

// The norm term of an update of a ZeRO part: the ranges of the bucket, in
// buffer coordinates, whose members this rank counts. The gradient buffer
// is laid out as the parameter buffer, whose members say what lies where.
StatusOr<GradNormTerm> PartTerm(const Block& block, const BufferMembers& members,
                                const Op& update, const NormCounting& count) {
  const proto::VarDesc* param = block.FindVar(update.Input("Param"));
  const auto& params = members.Of(param->flat().buffer());
  if (params.empty()) {
    return Internal(kPassName, ": ZeRO part ", param->name(), " of buffer ",
                    param->flat().buffer(), " has no member parameters to count by");
  }
  // The gradients, by offset, for the tied embedding's: members of the
  // gradient buffer (stage 1) or of the accumulators' (none under stage 2,
  // which does not shard a tied bucket's gradients).
  static const std::map<int64_t, const proto::VarDesc*> kNoGrads;
  const proto::VarDesc* grad = block.FindVar(update.Input("Grad"));
  const auto& grads =
      grad != nullptr && grad->has_flat() ? members.Of(grad->flat().buffer()) : kNoGrads;
  GradNormTerm term{update.Input("Grad"), {}, param->flat().shard_ring()};
  bool all = true;
  for (const auto& [offset, p] : params) {
    auto g = grads.find(offset);
    const std::string grad_name = g != grads.end() ? g->second->name() : "";
    if (!count.Counts(p->name(), grad_name)) {
      all = false;
      continue;
    }
    const int64_t end = offset + NumElements(MetaOf(*p).shape);
    if (!term.ranges.empty() && term.ranges.back().second == offset) {
      term.ranges.back().second = end;
    } else {
      term.ranges.emplace_back(offset, end);
    }
  }
  // Every member counted: the whole part (padding is zero).
  if (all) term.ranges = {{0, -1}};
  return term;
}

// Moves the ops that write an update's gradient, but sit after `first`
// and before that update, to just before `first`: the norm must see every
// gradient final. They read gradients only, which are final by then.
Status HoistGradWriters(Block& block, const BufferMembers& members, Op* first,
                        const std::vector<Op*>& updates) {
  std::map<std::string, int> read_by;  // gradient-side var -> its update's index
  for (const Op* u : updates) {
    const std::string& g = u->Input("Grad");
    read_by[g] = std::max(read_by[g], u->index());
    // A ZeRO part is written through its buffer and the buffer's members
    // too (a reduce-scatter; the tied embedding's all-reduce of a member).
    const proto::VarDesc* v = block.FindVar(g);
    if (v == nullptr || !v->has_flat() || v->flat().shard_ring() < 0) continue;
    read_by[v->flat().buffer()] = std::max(read_by[v->flat().buffer()], u->index());
    for (const auto& [offset, m] : members.Of(v->flat().buffer())) {
      read_by[m->name()] = std::max(read_by[m->name()], u->index());
    }
  }
  std::set<const Op*> update_set(updates.begin(), updates.end());
  std::vector<Op*> hoist;
  for (Op* op : block.OpVector()) {
    if (op->index() <= first->index() || update_set.count(op) || !op->HasRole(role::kOptimize)) {
      continue;
    }
    for (const std::string& out : op->OutputVars()) {
      auto it = read_by.find(out);
      if (it != read_by.end() && it->second > op->index()) {
        hoist.push_back(op);
        break;
      }
    }
  }
  const std::set<const Op*> hoisted(hoist.begin(), hoist.end());
  std::set<std::string> written_after;  // by ops that stay between
  for (Op* op : block.OpVector()) {
    if (op->index() < first->index()) continue;
    if (hoisted.count(op) > 0) {
      for (const std::string& in : op->InputVars()) {
        if (written_after.count(in)) {
          return Internal(kPassName, ": ", op->type(), " (op ", op->index(), ") writes gradient ",
                          op->OutputVars()[0], " but reads ", in, ", which an update writes "
                          "before it; the norm cannot precede the updates");
        }
      }
      continue;
    }
    for (const std::string& out : op->OutputVars()) written_after.insert(out);
  }
  for (Op* op : hoist) {
    proto::OpDesc desc = op->desc();
    block.EraseOp(op);
    block.InsertOpBefore(first, std::move(desc));
  }
  return Status::OK();
}

StatusOr<bool> GradClipPass::Run(PassContext& ctx) {
  if (!scaling_.any()) return false;
  LOOM_RETURN_IF_ERROR(TakeGradClip(ctx.program()).status());
  // Every stage keeps the scale: all of them undo it and adapt it, where
  // only the last seeds the loss gradient with it.
  if (scaling_.loss_scaling) {
    LOOM_RETURN_IF_ERROR(
        DeclareLossScaleState(ctx.program(), ctx.startup(), scaling_.init_loss_scale));
  }
  Block& block = ctx.program().global_block();
  std::vector<Op*> updates;
  for (Op* op : block.ops()) {
    if (IsParameterUpdate(*op)) updates.push_back(op);
  }
  const NormCounting count(block, ctx.layout(), ctx.coords());
  const BufferMembers members(block);
  std::vector<GradNormTerm> terms;
  std::vector<int> part_rings;
  int counted = 0;
  for (const Op* u : updates) {
    if (UpdatesAPart(block, *u)) {
      LOOM_ASSIGN_OR_RETURN(GradNormTerm term, PartTerm(block, members, *u, count));
      if (std::find(part_rings.begin(), part_rings.end(), term.part_ring) == part_rings.end()) {
        part_rings.push_back(term.part_ring);
      }
      if (!term.ranges.empty()) terms.push_back(std::move(term));
    } else if (count.Counts(u->Input("Param"), u->Input("Grad"))) {
      terms.push_back(GradNormTerm{u->Input("Grad"), {}, -1});
    }
    ++counted;
  }
  // Every rank of a ring issues the same all-reduces, whatever it counts.
  std::vector<std::pair<RingId, const char*>> rings;
  for (int r : part_rings) rings.emplace_back(static_cast<RingId>(r), stream::kSharding);
  if (ctx.layout().mp > 1) rings.emplace_back(kMpRing, stream::kMp);
  if (ctx.layout().pp > 1) rings.emplace_back(kPpRing, stream::kDp);

  std::vector<proto::OpDesc> section;
  section.push_back(SquaredNormOp(terms, kGradSquaredNormVar));
  // A ZeRO part's writers that name the bucket's members, not the part (the
  // tied embedding's all-reduce), record events its update waits on; the
  // norm reads the part too, so it waits on them as well.
  std::set<std::string> events;
  for (const Op* u : updates) {
    for (const std::string& e : u->desc().wait_events()) events.insert(e);
  }
  for (const std::string& e : events) section.front().add_wait_events(e);
  for (const auto& [ring, stream] : rings) {
    section.push_back(CollectiveOp("allreduce", {kGradSquaredNormVar}, {kGradSquaredNormVar}, ring,
                                   stream, role::kOptimize));
  }
  for (proto::OpDesc& d : GradScaleOps(scaling_)) section.push_back(std::move(d));
  Op* first = updates.empty() ? nullptr : updates.front();
  if (first != nullptr) LOOM_RETURN_IF_ERROR(HoistGradWriters(block, members, first, updates));
  for (proto::OpDesc& d : section) {
    d.set_creation_pass(kPassName);
    if (first != nullptr) {
      d.set_pipeline_stage(first->desc().pipeline_stage());
      d.set_chunk(first->desc().chunk());
      LOOM_RETURN_IF_ERROR(InsertOpInferShapes(block, first, std::move(d)).status());
    } else {
      d.set_pipeline_stage(ctx.coords().pp);
      LOOM_RETURN_IF_ERROR(AppendOpInferShapes(block, std::move(d)).status());
    }
  }
  for (Op* u : updates) block.SetInputs(u, "GradScale", {kGradScaleVar});
  ctx.Explain(kPassName, StrCat("the norm sums ", terms.size(), " of ", counted,
                                " updates' gradients here, then all-reduces over ",
                                rings.size(), " ring(s)",
                                scaling_.max_norm > 0 ? StrCat("; clipped to ", scaling_.max_norm)
                                                      : "",
                                scaling_.loss_scaling ? "; loss scaling" : ""));
  return true;
}

}  // namespace

PassInfo GradClipPassInfo() {
  using O = GradClipOptions;
  PassInfo info = PassInfoOf<GradClipPass, O>(
      kPassName,
      "clips the global gradient norm before the updates, and under fp16 loss scaling skips "
      "steps whose gradients overflowed: each rank sums the squares of the gradients it owns, "
      "the sums meet over the mp, pp and ZeRO rings");
  info.options = {
      FloatOption(&O::max_norm, "max-norm", "the norm to clip to; 0: no clipping", 0.0f, 1e30f),
      BoolOption(&O::loss_scaling, "loss-scaling",
                 "fp16 dynamic loss scaling: undo the scale, skip steps that overflowed, adapt "
                 "the scale (the program holds its state, passes/amp.h)"),
      IntOption(&O::growth_interval, "growth-interval",
                "good steps after which the loss scale doubles", 1, 1000000000000000),
      FloatOption(&O::init_loss_scale, "init-loss-scale",
                  "the first loss scale, for stages whose program does not hold it yet", 1.0f,
                  3e38f)};
  return info;
}

}  // namespace loom
