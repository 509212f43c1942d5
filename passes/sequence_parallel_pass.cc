// sequence-parallel: Megatron's sequence parallelism (Korthikanti et al.
// 2022, section 4.2.2) on a program tensor-parallel has rewritten.
//
// Between a row-parallel layer's output and the next column-parallel
// layer's input, tensor parallelism leaves every mp rank with the whole
// residual stream: layer norms, dropouts and residual adds run, and keep
// their activations, t times over. This pass splits that region along the
// sequence (dim `axis` of [B, S, H]), so each rank holds S/t positions:
//   - g, the all-reduce after a row-parallel matmul, becomes a
//     reduce-scatter along the sequence; backward, the output's gradient is
//     all-gathered before the matmul's gradient reads it;
//   - f, the identity before a column-parallel matmul, becomes an
//     all-gather; backward, the input gradient's all-reduce becomes a
//     reduce-scatter, and the matmul's gradient gathers its input again
//     rather than keep the whole gathered tensor from the forward;
//   - where the region starts from a value every rank holds whole (the
//     embeddings, after the position add), each rank slices its part, and
//     backward gathers the part's gradient;
//   - a pipeline stage sends and receives the region's tensors split;
//   - dropouts in the region record their shard's place, so masks are
//     the unsplit program's;
//   - the gradients of replicated parameters the region reads (layer norm
//     scales and biases, row-parallel biases) are partial sums over the
//     positions a rank holds, and are all-reduced over mp once a step,
//     before the update.
// The region is found from the graph: it grows from g's outputs through
// position-wise ops (layer norm, dropout, activations, elementwise ops
// with per-feature parameters) in both directions, and stops at f, at
// sends and receives, and at values made by anything else.
#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "framework/op_builder.h"
#include "framework/shape_inference.h"
#include "passes/comm_ops.h"
#include "passes/dropout_shard.h"
#include "passes/parallel_passes.h"

namespace loom {
namespace {

constexpr const char* kPassName = "sequence-parallel";

struct SequenceParallelOptions {
  int64_t axis = 1;  // the sequence dim of the activations, [B, S, H]
};

// Declares `name` with `like`'s dtype and shape (shape inference fixes
// the shape once the rewrite is done).
void DeclareLike(Block& block, const std::string& name, const std::string& like) {
  *block.AddVar(name) = *block.FindVar(like);
  block.FindVar(name)->set_name(name);
}

bool IsMpCollective(const Op& op, const char* type, uint32_t phase) {
  return op.type() == type && op.HasRole(phase) && op.HasAttr("ring_id") &&
         op.GetAttr<int32_t>("ring_id") == kMpRing;
}

// Ops that work position by position: splitting their activations along
// the sequence splits their work and changes no number.
bool IsPositionWise(const std::string& type) {
  static const std::unordered_set<std::string> kTypes = {
      "layer_norm", "dropout", "gelu", "relu", "scale", "cast",
      "elementwise_add", "elementwise_sub", "elementwise_mul"};
  return kTypes.count(type) > 0;
}

class SequenceParallelPass : public Pass {
 public:
  explicit SequenceParallelPass(const SequenceParallelOptions& options)
      : axis_(static_cast<int>(options.axis)) {}
  StatusOr<bool> Run(PassContext& ctx) override;

 private:
  // Parameter data: a persistable var, or a cast of one (AMP's copy).
  bool IsParameterData(const std::string& var) const;
  std::string ParameterOf(const std::string& var) const;
  // An op the region may cross: position-wise, with any parameter it
  // reads holding one value per feature (rank <= 1).
  bool Crossable(const Op& op) const;
  // Grows the region from g's outputs; fills sharded_, column_views_,
  // sources_, transfers_ and region_ops_.
  Status FindRegion(const std::vector<Op*>& forward);
  Status Split(const std::string& var, std::deque<std::string>& work);

  // The rewrites, each in the forward and the backward.
  Status ReduceScatterRowOutputs(Block& block);
  Status AllGatherColumnInputs(Block& block);
  Status SliceSources(Block& block);
  Status SplitTransfers(Block& block);
  Status AllReduceReplicatedGrads(Block& block);

  // Replaces `op` by `desc` (same place, id and stage).
  Op* Replace(Block& block, Op* op, proto::OpDesc desc);
  // The first of `ops` in program order, by the positions before any edit
  // (an edit would make Op::index() renumber the block each time).
  Op* Earliest(const std::vector<Op*>& ops) const;
  Op* PrefetchPoint(const Block& block, Op* reader) const;
  proto::OpDesc AlongSequence(proto::OpDesc d) const;
  // The single op writing `var`, or an error naming it.
  StatusOr<Op*> OnlyProducer(const Block& block, const std::string& var) const;

  int axis_;
  int64_t degree_ = 1;
  int rank_ = 0;
  const Block* block_ = nullptr;
  std::unordered_map<int64_t, std::vector<Op*>> grad_ops_;
  std::unordered_set<std::string> sharded_;
  std::unordered_map<const Op*, int> position_;
  std::vector<Op*> row_reduces_;            // g, forward all-reduces
  std::unordered_set<const Op*> row_reduce_set_;
  std::vector<Op*> column_views_;           // f, identities of split inputs
  std::vector<std::string> sources_;        // whole values sliced on entry
  std::vector<Op*> region_ops_;
  std::vector<Op*> transfers_;  // recvs of split values
  int grad_reduces_ = 0;
};

bool SequenceParallelPass::IsParameterData(const std::string& var) const {
  const proto::VarDesc* desc = block_->FindVar(var);
  if (desc == nullptr) return false;
  if (desc->persistable()) return true;
  const std::vector<Op*>& producers = block_->Producers(var);
  return producers.size() == 1 && producers.front()->type() == "cast" &&
         IsParameterData(producers.front()->Input("X"));
}

std::string SequenceParallelPass::ParameterOf(const std::string& var) const {
  const proto::VarDesc* desc = block_->FindVar(var);
  if (desc != nullptr && desc->persistable()) return var;
  return ParameterOf(block_->Producers(var).front()->Input("X"));
}

bool SequenceParallelPass::Crossable(const Op& op) const {
  if (!op.HasRole(role::kForward) || op.HasRole(role::kComm) || !IsPositionWise(op.type())) {
    return false;
  }
  for (const std::string& in : op.InputVars()) {
    if (!IsParameterData(in)) continue;
    const proto::VarDesc* desc = block_->FindVar(in);
    if (desc->shape_size() > 1) return false;  // per position: the position add
  }
  return true;
}

Status SequenceParallelPass::Split(const std::string& var, std::deque<std::string>& work) {
  if (IsParameterData(var) || !sharded_.insert(var).second) return Status::OK();
  const proto::VarDesc* desc = block_->FindVar(var);
  if (desc == nullptr || desc->shape_size() <= axis_) {
    return InvalidArgument("sequence parallelism reaches ", var, " ",
                           desc ? ShapeToString(MetaOf(*desc).shape) : "(undeclared)",
                           ", which has no dim ", axis_, " to split");
  }
  if (desc->shape(axis_) % degree_ != 0) {
    return InvalidArgument("mp.degree (", degree_, ") does not divide the sequence dim ", axis_,
                           " of ", var, " ", ShapeToString(MetaOf(*desc).shape),
                           "; sequence parallelism splits it evenly");
  }
  work.push_back(var);
  return Status::OK();
}

Status SequenceParallelPass::FindRegion(const std::vector<Op*>& forward) {
  std::deque<std::string> work;
  for (Op* op : forward) {
    if (!IsMpCollective(*op, "allreduce", role::kForward)) continue;
    Op* producer = block_->FirstProducer(op->Input("X"));
    // The vocabulary-parallel embedding's sum stays whole: the position
    // embedding it meets next is per position.
    if (producer == nullptr || producer->type() != "matmul") continue;
    row_reduces_.push_back(op);
    row_reduce_set_.insert(op);
    LOOM_RETURN_IF_ERROR(Split(op->Output("Out"), work));
  }
  std::unordered_set<const Op*> seen;
  std::unordered_set<std::string> source_set;
  auto visit = [&](Op* op) -> Status {
    if (!seen.insert(op).second) return Status::OK();
    region_ops_.push_back(op);
    for (const std::string& v : op->InputVars()) LOOM_RETURN_IF_ERROR(Split(v, work));
    for (const std::string& v : op->OutputVars()) LOOM_RETURN_IF_ERROR(Split(v, work));
    return Status::OK();
  };
  while (!work.empty()) {
    const std::string var = work.front();
    work.pop_front();
    for (Op* c : block_->Consumers(var)) {
      if (!c->HasRole(role::kForward)) continue;
      if (Crossable(*c)) {
        LOOM_RETURN_IF_ERROR(visit(c));
      } else if (IsMpCollective(*c, "identity", role::kForward)) {
        if (seen.insert(c).second) column_views_.push_back(c);
      } else if (c->type() != "send") {
        return InvalidArgument(c->Location(), " reads ", var,
                               ", which sequence parallelism splits along dim ", axis_,
                               "; only position-wise ops, a column-parallel layer's input "
                               "and sends may");
      }
    }
    Op* p = block_->FirstProducer(var);
    if (p == nullptr || !p->HasRole(role::kForward)) continue;
    if (Crossable(*p)) {
      LOOM_RETURN_IF_ERROR(visit(p));
    } else if (p->type() == "recv") {
      if (seen.insert(p).second) transfers_.push_back(p);
    } else if (!row_reduce_set_.count(p) && source_set.insert(var).second) {
      sources_.push_back(var);
    }
  }
  return Status::OK();
}

proto::OpDesc SequenceParallelPass::AlongSequence(proto::OpDesc d) const {
  *d.add_attrs() = MakeAttr("nranks", static_cast<int32_t>(degree_));
  *d.add_attrs() = MakeAttr("axis", static_cast<int32_t>(axis_));
  return d;
}

Op* SequenceParallelPass::Earliest(const std::vector<Op*>& ops) const {
  auto at = [&](const Op* op) {
    auto it = position_.find(op);
    return it != position_.end() ? it->second : op->index();  // one this pass inserted
  };
  return *std::min_element(ops.begin(), ops.end(),
                           [&](const Op* a, const Op* b) { return at(a) < at(b); });
}

Op* SequenceParallelPass::Replace(Block& block, Op* op, proto::OpDesc desc) {
  desc.set_id(op->id());
  Op* at = block.InsertOpBefore(op, std::move(desc));
  block.EraseOp(op);
  return at;
}

StatusOr<Op*> SequenceParallelPass::OnlyProducer(const Block& block,
                                                 const std::string& var) const {
  const std::vector<Op*>& producers = block.Producers(var);
  if (producers.size() != 1) {
    return InvalidArgument(var, " has ", producers.size(),
                           " writers; sequence parallelism expects the one autodiff made");
  }
  return producers.front();
}

// g: the partial products are summed and split in one step; the backward
// gathers the output's gradient for the matmul's gradient.
Status SequenceParallelPass::ReduceScatterRowOutputs(Block& block) {
  for (Op* reduce : row_reduces_) {
    const std::string out = reduce->Output("Out");
    Op* rs = Replace(block, reduce,
                     AlongSequence(MpCollectiveBeside("reduce_scatter", reduce->Input("X"), out,
                                                      role::kForward, *reduce)));
    const std::string grad = GradVarName(out);
    std::vector<Op*> readers;
    for (Op* c : block.Consumers(grad)) {
      if (c->HasRole(role::kBackward)) readers.push_back(c);
    }
    if (readers.empty()) continue;
    const std::string whole = grad + "@SP_WHOLE";
    DeclareLike(block, whole, grad);
    block.InsertOpBefore(Earliest(readers),
                         AlongSequence(MpCollectiveBeside("allgather", grad, whole,
                                                          role::kBackward, *rs)));
    for (Op* r : readers) block.RenameInput(r, grad, whole);
  }
  return Status::OK();
}

// Where the backward's second all-gather for `reader` (a column-parallel
// matmul's gradient) starts: before the GEMM that makes the gradient it
// reads, found up the chain of single gradient inputs (bias, activation,
// reshapes), so that the gather runs under that GEMM, as Megatron runs it
// under the input gradient's. `reader` itself where there is none near.
Op* SequenceParallelPass::PrefetchPoint(const Block& block, Op* reader) const {
  constexpr int kMostHops = 8;
  Op* at = reader;
  for (int hop = 0; hop < kMostHops; ++hop) {
    const std::string& dout = at->Input(GradSlot("Out"));
    if (dout.empty()) break;
    const std::vector<Op*>& producers = block.Producers(dout);
    if (producers.size() != 1 || !producers.front()->HasRole(role::kBackward) ||
        producers.front()->HasRole(role::kComm)) {
      break;
    }
    at = producers.front();
    if (at->type() == "matmul_grad") return at;
  }
  return reader;
}

// f: the split input is gathered; backward, the input gradient is summed
// and split, and the matmul's gradient gathers the input again.
Status SequenceParallelPass::AllGatherColumnInputs(Block& block) {
  for (Op* view : column_views_) {
    const std::string x = view->Input("X");
    const std::string gathered = view->Output("Out");
    Op* ag = Replace(block, view,
                     AlongSequence(MpCollectiveBeside("allgather", x, gathered,
                                                      role::kForward, *view)));
    std::vector<Op*> grads;
    for (Op* c : block.Consumers(gathered)) {
      if (c->HasRole(role::kBackward)) grads.push_back(c);
    }
    if (grads.empty()) continue;
    const std::string again = x + "@SP_GATHER";
    DeclareLike(block, again, gathered);
    block.InsertOpBefore(PrefetchPoint(block, Earliest(grads)),
                         AlongSequence(MpCollectiveBeside("allgather", x, again,
                                                          role::kBackward, *ag)));
    for (Op* g : grads) {
      block.RenameInput(g, gathered, again);
      // The input gradient's all-reduce (tensor-parallel's), now split.
      const std::string dx = g->Output("X@GRAD");
      if (dx.empty()) continue;
      for (Op* reduce : std::vector<Op*>(block.Consumers(dx))) {
        if (!IsMpCollective(*reduce, "allreduce", role::kBackward)) continue;
        Replace(block, reduce,
                AlongSequence(MpCollectiveBeside("reduce_scatter", dx, reduce->Output("Out"),
                                                 role::kBackward, *reduce)));
      }
    }
  }
  return Status::OK();
}

// A whole value entering the region: each rank slices its positions; the
// gradient of the slice is gathered back to the whole.
Status SequenceParallelPass::SliceSources(Block& block) {
  for (const std::string& v : sources_) {
    LOOM_ASSIGN_OR_RETURN(Op* producer, OnlyProducer(block, v));
    const std::string part = v + "@SP_PART";
    DeclareLike(block, part, v);
    const int64_t n = block.FindVar(v)->shape(axis_) / degree_;
    proto::OpDesc slice = OpDescBuilder("slice")
                              .Input("X", v)
                              .Output("Out", part)
                              .Attr("axes", std::vector<int32_t>{axis_})
                              .Attr("starts", std::vector<int64_t>{rank_ * n})
                              .Attr("ends", std::vector<int64_t>{(rank_ + 1) * n})
                              .Role(role::kForward);
    slice.set_pipeline_stage(producer->desc().pipeline_stage());
    slice.set_chunk(producer->desc().chunk());
    slice.set_layer(producer->desc().layer());
    block.InsertOpAfter(producer, std::move(slice));
    for (Op* c : std::vector<Op*>(block.Consumers(v))) {
      if (!c->HasRole(role::kForward) || c->type() == "slice") continue;
      block.RenameInput(c, v, part);
      for (Op* g : grad_ops_[c->id()]) block.RenameInput(g, v, part);
    }
    const std::string grad = GradVarName(v);
    if (!block.HasVar(grad)) continue;
    LOOM_ASSIGN_OR_RETURN(Op* writer, OnlyProducer(block, grad));
    const std::string part_grad = GradVarName(part);
    DeclareLike(block, part_grad, grad);
    block.RenameOutput(writer, grad, part_grad);
    block.InsertOpAfter(writer, AlongSequence(MpCollectiveBeside(
                                    "allgather", part_grad, grad, role::kBackward, *writer)));
  }
  return Status::OK();
}

// Received region values, and their gradients, arrive split: the stage
// that sends them holds them split.
Status SequenceParallelPass::SplitTransfers(Block& block) {
  for (Op* recv : block.ops()) {
    if (recv->type() != "recv") continue;
    std::string var = recv->Output("Out");
    if (recv->HasRole(role::kBackward)) {
      const size_t at = var.find(kGradSuffix);
      if (at == std::string::npos) continue;
      var = var.substr(0, at);
    }
    if (!sharded_.count(var)) continue;
    auto shape = recv->GetAttr<std::vector<int64_t>>("out_shape");
    if (static_cast<int>(shape.size()) <= axis_ || shape[axis_] % degree_ != 0) {
      return InvalidArgument(recv->Location(), " receives ", recv->Output("Out"), " ",
                             ShapeToString(shape), ", which sequence parallelism cannot split ",
                             degree_, " ways along dim ", axis_);
    }
    shape[axis_] /= degree_;
    recv->SetAttr("out_shape", shape);
  }
  return Status::OK();
}

// Each rank's gradient of a replicated parameter the region reads covers
// its positions only: the ranks' parts are summed once a step, on the
// accumulated gradient just before the update, as Megatron sums its
// layer-norm gradients after the last micro-batch.
Status SequenceParallelPass::AllReduceReplicatedGrads(Block& block) {
  std::set<std::string> params;  // sorted: a fixed order of collectives
  for (const Op* op : region_ops_) {
    for (const std::string& in : op->InputVars()) {
      if (IsParameterData(in)) params.insert(ParameterOf(in));
    }
  }
  for (const std::string& p : params) {
    const std::string grad = GradVarName(p);
    for (Op* update : std::vector<Op*>(block.Consumers(grad))) {
      if (!update->HasRole(role::kOptimize) || update->Input("Param") != p) continue;
      proto::OpDesc reduce =
          CollectiveOp("allreduce", {grad}, {grad}, kMpRing, stream::kMp, role::kOptimize);
      reduce.set_pipeline_stage(update->desc().pipeline_stage());
      reduce.set_chunk(update->desc().chunk());
      block.InsertOpBefore(update, std::move(reduce));
      ++grad_reduces_;
    }
  }
  return Status::OK();
}

StatusOr<bool> SequenceParallelPass::Run(PassContext& ctx) {
  degree_ = ctx.mp_degree();
  if (degree_ == 1) {
    ctx.Explain(kPassName, "mp.degree is 1: nothing to split");
    return false;
  }
  if (axis_ < 1) {
    return InvalidArgument("sequence-parallel's axis must be past the batch (dim 0), got ",
                           axis_);
  }
  rank_ = ctx.coords().mp;
  Block& block = ctx.program().global_block();
  block_ = &block;
  std::vector<Op*> forward;
  for (Op* op : block.ops()) {
    position_.emplace(op, static_cast<int>(position_.size()));
    if (op->HasRole(role::kForward)) forward.push_back(op);
    if (op->HasRole(role::kBackward) && op->desc().forward_id() > 0) {
      grad_ops_[op->desc().forward_id()].push_back(op);
    }
  }
  LOOM_RETURN_IF_ERROR(FindRegion(forward));
  if (row_reduces_.empty()) {
    ctx.Explain(kPassName, "no row-parallel all-reduce to split from");
    return false;
  }
  // Dropout inputs before the split, to place the masks after it.
  std::vector<std::pair<Op*, Shape>> dropouts;
  for (Op* op : region_ops_) {
    if (op->type() == "dropout") {
      dropouts.emplace_back(op, MetaOf(*block.FindVar(op->Input("X"))).shape);
    }
  }
  // Parameters first: the region's ops are still in place.
  LOOM_RETURN_IF_ERROR(AllReduceReplicatedGrads(block));
  LOOM_RETURN_IF_ERROR(SliceSources(block));
  LOOM_RETURN_IF_ERROR(ReduceScatterRowOutputs(block));
  LOOM_RETURN_IF_ERROR(AllGatherColumnInputs(block));
  LOOM_RETURN_IF_ERROR(SplitTransfers(block));
  Status shapes = ReinferShapes(block);
  if (!shapes.ok()) return shapes.WithContext(StrCat("sequence parallelism over ", degree_));
  for (const auto& [op, before] : dropouts) {
    LOOM_RETURN_IF_ERROR(PlaceDropoutShard(block, op, before, degree_, rank_).status());
  }
  ctx.Explain(kPassName,
              StrCat("split ", sharded_.size(), " vars along dim ", axis_, " ", degree_,
                     " ways for mp rank ", rank_, ": ", row_reduces_.size(),
                     " reduce-scatters, ", column_views_.size(), " all-gathers, ",
                     sources_.size(), " sliced entries, ", transfers_.size(),
                     " split receives, ", dropouts.size(), " dropouts placed, ", grad_reduces_,
                     " replicated gradients summed over mp once a step"));
  return true;
}

}  // namespace

PassInfo SequenceParallelPassInfo() {
  using O = SequenceParallelOptions;
  PassInfo info = PassInfoOf<SequenceParallelPass, O>(
      kPassName,
      "Megatron sequence parallelism: splits the residual stream between tensor-parallel "
      "layers along the sequence, with all-gathers and reduce-scatters for the all-reduces");
  info.options = {IntOption(&O::axis, "axis", "the activations' sequence dim", 1, 8)};
  return info;
}

}  // namespace loom
