// tensor-parallel: Megatron-style tensor parallelism over a whole training
// program (forward, backward and optimizer), for one mp rank.
//
// Parameters carry the dim to split (VarDesc.mp_axis, set by the model
// builder). The pass shards those parameters and their optimizer state,
// then rewrites the ops around them:
//   - column-parallel matmul (weight split on its output columns): an
//     `identity` before it, whose backward is an `allreduce` of the input
//     gradient: Megatron's f;
//   - row-parallel matmul (weight split on its input rows): an `allreduce`
//     of the partial products after it, whose backward is the identity:
//     Megatron's g;
//   - vocabulary-parallel embedding: each rank looks up its own rows
//     (start_index) and the partial embeddings are all-reduced;
//   - cross entropy over vocabulary-sharded logits becomes the parallel
//     c_softmax_with_cross_entropy;
//   - a dropout whose input the split reaches (attention probs, split by
//     head) records where this rank's shard lies in the full tensor
//     (full_shape, shard_offsets), so that it draws the full tensor's mask
//     there; a dropout after a row-parallel all-reduce sees the whole
//     tensor on every rank and draws the same mask on all of them.
// The startup program initializes each full parameter as before and slices
// this rank's part, so that every layout starts from the serial numbers.
// Shapes then flow through the program by re-running shape inference.
#include <unordered_map>
#include <unordered_set>

#include "framework/op_builder.h"
#include "framework/optimizer.h"
#include "framework/shape_inference.h"
#include "passes/comm_ops.h"
#include "passes/dropout_shard.h"
#include "passes/parallel_passes.h"

namespace loom {
namespace {

constexpr const char* kPassName = "tensor-parallel";

struct TensorParallelOptions {
  int64_t degree = 1;
  bool async_allreduce = true;
};

class TensorParallelPass : public Pass {
 public:
  explicit TensorParallelPass(const TensorParallelOptions& options)
      : degree_(options.degree), async_(options.async_allreduce) {}
  StatusOr<bool> Run(PassContext& ctx) override;

 private:
  Status ShardVar(Block& block, const std::string& name, int axis);
  Status SliceInStartup(Block& startup, const std::string& name, int axis);
  Status RewriteMatmul(Block& block, Op* op, int axis);
  Status RewriteEmbedding(Block& block, Op* op);
  Status RewriteCrossEntropy(Op* op);
  // The `<type>_grad` ops autodiff made for forward op `op` (gradient sums
  // it owns are left out).
  std::vector<Op*> GradOpsOf(const Op* op) const {
    std::vector<Op*> out;
    auto it = grad_ops_.find(op->id());
    if (it == grad_ops_.end()) return out;
    for (Op* g : it->second) {
      if (g->type() == op->type() + "_grad") out.push_back(g);
    }
    return out;
  }
  // Inserts `allreduce(partial) -> var` after `pos`, renaming `var` to its
  // partial name among `producer`'s outputs.
  Status AllReduceOutput(Block& block, Op* producer, std::string var,
                         uint32_t role);

  int64_t degree_;
  int rank_ = 0;
  std::unordered_map<int64_t, std::vector<Op*>> grad_ops_;
  std::unordered_map<std::string, std::string> identity_of_;
  std::unordered_set<std::string> vocab_sharded_;
  // A cast of a sharded parameter -> the parameter.
  std::unordered_map<std::string, std::string> cast_source_;
  int rewritten_ = 0;
  bool async_ = true;  // the input gradient's all-reduce before the weight GEMM
  int views_ = 0;  // identity views inserted (f of the f/g pairs)
};

Status TensorParallelPass::ShardVar(Block& block, const std::string& name,
                                    int axis) {
  proto::VarDesc* var = block.FindVar(name);
  if (var == nullptr) return Status::OK();
  if (axis >= var->shape_size()) {
    return InvalidArgument("parameter ", name, " has mp_axis ", axis,
                           " but only ", var->shape_size(), " dims");
  }
  const int64_t dim = var->shape(axis);
  if (dim % degree_ != 0) {
    return InvalidArgument("mp.degree (", degree_, ") does not divide dim ",
                           axis, " (", dim, ") of ", name, " ",
                           ShapeToString(MetaOf(*var).shape));
  }
  var->set_shape(axis, dim / degree_);
  return Status::OK();
}

Status TensorParallelPass::SliceInStartup(Block& startup,
                                          const std::string& name, int axis) {
  proto::VarDesc* var = startup.FindVar(name);
  Op* init = startup.FirstProducer(name);
  if (var == nullptr || init == nullptr) return Status::OK();
  const std::string full = name + "@MP_FULL";
  *startup.AddVar(full) = *var;
  startup.FindVar(full)->set_name(full);
  startup.FindVar(full)->set_persistable(false);
  startup.FindVar(full)->set_is_parameter(false);
  startup.RenameOutput(init, name, full);
  LOOM_RETURN_IF_ERROR(ShardVar(startup, name, axis));
  const int64_t part = var->shape(axis);
  return InsertOpAfterInferShapes(
             startup, init,
             OpDescBuilder("slice")
                 .Input("X", full)
                 .Output("Out", name)
                 .Attr("axes", std::vector<int32_t>{axis})
                 .Attr("starts", std::vector<int64_t>{rank_ * part})
                 .Attr("ends", std::vector<int64_t>{(rank_ + 1) * part}))
      .status();
}

// `var` by value: it usually refers into the producer's desc, which the
// rename below rewrites.
Status TensorParallelPass::AllReduceOutput(Block& block, Op* producer,
                                           std::string var, uint32_t role) {
  const std::string partial = var + "@MP_PARTIAL";
  *block.AddVar(partial) = *block.FindVar(var);
  block.FindVar(partial)->set_name(partial);
  block.RenameOutput(producer, var, partial);
  return InsertOpAfterInferShapes(block, producer,
                                  MpCollectiveBeside("allreduce", partial, var, role, *producer))
      .status();
}

Status TensorParallelPass::RewriteMatmul(Block& block, Op* op, int axis) {
  const bool transpose_y = op->GetAttr<bool>("transpose_y");
  const bool column = (axis == 1) != transpose_y;
  if (column) {
    // f: identity forward, all-reduce of the input gradient backward.
    const std::string x = op->Input("X");
    auto it = identity_of_.find(x);
    if (it == identity_of_.end()) {
      const std::string xi = x + "@MP_IN";
      // A view of x (no copy, no work), so it runs on calc beside its
      // consumer rather than costing a hop to the mp stream and back.
      proto::OpDesc f = MpCollectiveBeside("identity", x, xi, role::kForward, *op);
      f.clear_stream();
      LOOM_RETURN_IF_ERROR(InsertOpInferShapes(block, op, std::move(f)).status());
      ++views_;
      it = identity_of_.emplace(x, xi).first;
    }
    block.RenameInput(op, x, it->second);
    for (Op* grad : GradOpsOf(op)) {
      block.RenameInput(grad, x, it->second);
      const std::string dx = grad->Output("X@GRAD");
      if (dx.empty()) continue;
      // The weight gradient needs no communication: computing it after the
      // input gradient's all-reduce is issued lets the two overlap (the
      // input gradient first, then the all-reduce and the weight GEMM side
      // by side, as Megatron's asynchronous tensor-parallel all-reduce does).
      Op* weight_grad = nullptr;
      if (async_ && !grad->Output("Y@GRAD").empty()) {
        proto::OpDesc w = grad->desc();
        w.set_id(0);
        for (auto& slot : *w.mutable_outputs()) {
          if (slot.name() == "X@GRAD") slot.set_vars(0, "");
        }
        block.SetOutputs(grad, "Y@GRAD", {""});
        grad->annotations().clear_param_grads();
        weight_grad = block.InsertOpAfter(grad, std::move(w));
      }
      LOOM_RETURN_IF_ERROR(AllReduceOutput(block, grad, dx, role::kBackward));
      if (weight_grad != nullptr) {
        // Move the weight half after the all-reduce just inserted.
        proto::OpDesc w = weight_grad->desc();
        const Op* reduce = block.Consumers(dx + "@MP_PARTIAL").front();
        block.EraseOp(weight_grad);
        block.InsertOpAfter(reduce, std::move(w));
      }
    }
    vocab_sharded_.insert(op->Output("Out"));
  } else {
    // g: all-reduce of the partial products forward, identity backward.
    LOOM_RETURN_IF_ERROR(
        AllReduceOutput(block, op, op->Output("Out"), role::kForward));
  }
  ++rewritten_;
  return Status::OK();
}

Status TensorParallelPass::RewriteEmbedding(Block& block, Op* op) {
  // The parameter itself: a cast of it is reshaped only after the rewrite.
  auto source = cast_source_.find(op->Input("W"));
  const proto::VarDesc* w =
      block.FindVar(source == cast_source_.end() ? op->Input("W") : source->second);
  const int64_t start = rank_ * w->shape(0);  // already sharded
  op->SetAttr("start_index", start);
  for (Op* grad : GradOpsOf(op)) grad->SetAttr("start_index", start);
  LOOM_RETURN_IF_ERROR(
      AllReduceOutput(block, op, op->Output("Out"), role::kForward));
  ++rewritten_;
  return Status::OK();
}

Status TensorParallelPass::RewriteCrossEntropy(Op* op) {
  auto parallel = [&](Op* o, const std::string& type) {
    o->annotations().set_type(type);
    o->SetAttr("ring_id", static_cast<int32_t>(kMpRing));
    o->SetAttr("nranks", static_cast<int32_t>(degree_));
    o->SetAttr("rank", static_cast<int32_t>(rank_));
  };
  // Look the grad ops up while the forward op still has its old type.
  const std::vector<Op*> grads = GradOpsOf(op);
  parallel(op, "c_softmax_with_cross_entropy");
  op->annotations().set_role(op->role() | role::kComm);
  for (Op* grad : grads) parallel(grad, "c_softmax_with_cross_entropy_grad");
  ++rewritten_;
  return Status::OK();
}

StatusOr<bool> TensorParallelPass::Run(PassContext& ctx) {
  ctx.ResolveMpDegree(static_cast<int>(degree_));
  ctx.resolved().set_mp_async_allreduce(async_);
  if (degree_ == 1) return false;
  rank_ = ctx.coords().mp;
  Block& block = ctx.program().global_block();

  // Shard parameters and, with them, the optimizer state of the same shape.
  // Sorted, so that errors and the startup rewrite are deterministic.
  const std::map<std::string, int> ordered = MpShardedVars(block);
  std::unordered_map<std::string, int> sharded(ordered.begin(), ordered.end());
  for (const auto& [name, axis] : ordered) {
    LOOM_RETURN_IF_ERROR(ShardVar(block, name, axis));
    LOOM_RETURN_IF_ERROR(SliceInStartup(ctx.startup().global_block(), name, axis)
                             .WithContext("startup program"));
  }

  for (Op* op : block.ops()) {
    if (op->HasRole(role::kBackward) && op->desc().forward_id() > 0) {
      grad_ops_[op->desc().forward_id()].push_back(op);
    }
  }
  std::vector<Op*> forward;
  for (Op* op : block.ops()) {
    if (op->HasRole(role::kForward)) forward.push_back(op);
  }
  // Dropout inputs as the serial program has them, to see below which the
  // split reaches.
  std::vector<std::pair<Op*, Shape>> dropouts;
  for (Op* op : forward) {
    if (op->type() != "dropout") continue;
    if (const proto::VarDesc* x = block.FindVar(op->Input("X"))) {
      dropouts.emplace_back(op, MetaOf(*x).shape);
    }
  }
  // Under mixed precision a matmul or a lookup reads its parameter through
  // a cast (passes/amp.h): the cast's output splits as the parameter does.
  for (Op* op : forward) {
    if (op->type() != "cast") continue;
    auto it = sharded.find(op->Input("X"));
    if (it == sharded.end()) continue;
    sharded[op->Output("Out")] = it->second;
    cast_source_[op->Output("Out")] = op->Input("X");
  }
  for (Op* op : forward) {
    const std::string& type = op->type();
    if (type == "cast") {
      // Logits cast to fp32 for the loss stay split over the vocabulary.
      if (vocab_sharded_.count(op->Input("X"))) vocab_sharded_.insert(op->Output("Out"));
    } else if (type == "matmul" && sharded.count(op->Input("Y"))) {
      LOOM_RETURN_IF_ERROR(RewriteMatmul(block, op, sharded[op->Input("Y")]));
    } else if (type == "lookup_table" && sharded.count(op->Input("W"))) {
      LOOM_RETURN_IF_ERROR(RewriteEmbedding(block, op));
    } else if (type == "softmax_with_cross_entropy" &&
               vocab_sharded_.count(op->Input("Logits"))) {
      LOOM_RETURN_IF_ERROR(RewriteCrossEntropy(op));
    } else if (type.rfind("elementwise_", 0) != 0) {
      for (const std::string& in : op->InputVars()) {
        if (sharded.count(in)) {
          return InvalidArgument(
              op->Location(), " reads the tensor-parallel parameter ", in,
              "; only matmul, lookup_table and elementwise ops can");
        }
      }
    }
  }
  Status shapes = ReinferShapes(block);
  if (!shapes.ok()) {
    return shapes.WithContext(StrCat("with mp.degree ", degree_));
  }
  for (const auto& [op, before] : dropouts) {
    LOOM_ASSIGN_OR_RETURN(const bool placed, PlaceDropoutShard(block, op, before, degree_, rank_));
    rewritten_ += placed;
  }
  LOOM_RETURN_IF_ERROR(ReinferShapes(ctx.startup().global_block())
                           .WithContext("startup program"));
  ctx.Explain(kPassName, StrCat("sharded ", sharded.size(), " vars ", degree_,
                                " ways; rewrote ", rewritten_, " ops for mp rank ",
                                rank_, "; ", views_,
                                " inputs enter through identity views (no copies)"));
  return true;
}

}  // namespace

PassInfo TensorParallelPassInfo() {
  using O = TensorParallelOptions;
  PassInfo info = PassInfoOf<TensorParallelPass, O>(
      kPassName,
      "Megatron tensor parallelism: shards annotated parameters, inserts the f/g identity and "
      "all-reduce pairs");
  info.options = {
      IntOption(&O::degree, "degree", "mp ranks", 1, kMaxPassDegree),
      BoolOption(&O::async_allreduce, "async-allreduce",
                 "issue the input gradient's all-reduce before the weight gradient's GEMM, so "
                 "that they overlap")};
  return info;
}

}  // namespace loom
