// sharding: ZeRO stages 1 to 3 over the data-parallel group. Each dp rank
// keeps and updates 1/N of every bucket's optimizer state instead of all of
// it; under stage 2 it also keeps only 1/N of the bucket's gradients
// (sharding_gradients.h); under stage 3 only 1/N of its parameters,
// which forward and backward gather before reading (sharding_gathers.h).
//
// The data-parallel pass has made each bucket one flat gradient buffer G
// (VarDesc.flat) whose members share one kind of update. Per bucket:
//
//   G padded to a multiple of N;  the bucket's parameters placed in a flat
//   buffer P laid out as G (parameter i where gradient i is);
//   all-reduce(members)      ->  reduce_scatter(G) -> G.shard (avg, in place)
//   N updates of parameters  ->  one update of P.shard from G.shard, with
//                                its moments of the shard's size
//   (after it)                   all_gather(P.shard) -> P (in place)
//
// G.shard and P.shard are the rank's part of G and P (FlatSlot.shard_ring):
// every dp rank runs the same program. Nothing is copied: the collectives
// run on the buffers in place, and the update runs on views. The update is
// elementwise, so each element is updated exactly as before; the padding is
// zero and stays zero. The moments shrink by N: that is the memory this
// stage saves (`loom simulate` shows it as optimizer state).
//
// Ops that write a bucket's gradients between its reduce-scatter and its
// update (the tied embedding's all-reduce across the first and last stage)
// are made to record an event that the update waits on; the gradients'
// zeroing (gradient accumulation) moves after the update. The collectives
// run on the sharding stream (still the dp group's ring), so that traces
// and `loom simulate` count them as sharding communication.
//
// The fetch-mode option (sharding.fetch_mode) picks how P is made whole
// again: an all-gather of the shards, or (DeepSpeed's fetch) an all-reduce
// of P with every part but the rank's own zeroed, both in place; "auto"
// takes the one the comm model prices lower, bucket by bucket. Stage 3 fetches the same ways,
// before use instead of after the update.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "cost_model/comm_model.h"
#include "framework/op_builder.h"
#include "framework/shape_inference.h"
#include "framework/wire_dtype.h"
#include "passes/comm_ops.h"
#include "passes/parallel_passes.h"
#include "passes/sharding_gathers.h"
#include "passes/sharding_gradients.h"

namespace loom {
namespace {

constexpr const char* kPassName = "sharding";

struct ShardingOptions {
  int64_t stage = 1;
  int64_t degree = 0;  // ranks sharing a state; 0: the dp degree
  std::string fetch_mode = "all_gather";
  int64_t prefetch_depth = 1;
  int64_t keep_gathered_bytes = 0;  // -1: all
};

class ShardingPass : public Pass {
 public:
  explicit ShardingPass(const ShardingOptions& options) : options_(options) {}
  StatusOr<bool> Run(PassContext& ctx) override;

 private:
  Status Shard(PassContext& ctx, ShardingBucket& b, std::vector<GatheredBucket>* gathered);
  // One update of the bucket's shard in place of its members' (the last
  // one's attributes), with state of the shard's size where the members'
  // was parameter-sized, filled in the startup program; `*old_state` gets
  // the members' state vars, which go.
  StatusOr<proto::OpDesc> ShardUpdate(PassContext& ctx, const ShardingBucket& b,
                                      const std::string& base, const std::string& p_shard,
                                      const std::string& g_shard, int64_t shard,
                                      std::set<std::string>* old_state);
  // Hybrid sharding: the all-reduce that averages the gradient shard over
  // the groups holding the same state, placed after `anchor` or after the
  // shard's last writer; returns what the update then goes after.
  StatusOr<Op*> AverageAcrossReplicas(PassContext& ctx, const ShardingBucket& b,
                                      const std::string& g_shard, bool tied,
                                      const proto::OpDesc& update, Op* anchor);
  // Makes P whole after the update of P.shard (stages 1 and 2, and a
  // tied bucket): by all-gather or all-reduce; returns the op.
  StatusOr<Op*> FetchAfterUpdate(PassContext& ctx, Op* placed, const std::string& p_buffer,
                                 const std::string& p_shard, int64_t padded, DataType dtype);
  // The fetch mode for a bucket of `bytes`; "auto" asks the comm model
  // and says why.
  StatusOr<bool> FetchByAllReduce(PassContext& ctx, const std::string& bucket, int64_t bytes);

  const ShardingOptions options_;
  int n_ = 1;              // ranks sharing a bucket's state
  RingId ring_ = kDpRing;  // theirs: the dp ring, or under hybrid sharding kShardingRing
  int replicas_ = 1;       // hybrid sharding: groups holding the same state
  int stage_ = 1;
  int64_t keep_left_ = 0;  // stage 3: bytes of buckets still to keep whole
  int events_ = 0;
};

// The var the update `op` keeps in `slot` (reads it there and writes it to
// slot+"Out"): its optimizer state.
bool IsStateSlot(const Op& op, const proto::OpDesc::Slot& slot) {
  return slot.name() != "Param" && slot.vars_size() == 1 && op.HasOutput(slot.name() + "Out") &&
         op.Output(slot.name() + "Out") == slot.vars(0);
}

// Whether another op than the bucket's all-reduce and updates reads its
// gradients: an all-reduce before the update, which needs them whole after
// the reduce (the tied embedding's across the first and last stage;
// sequence parallelism's of layer-norm and bias gradients across mp).
bool TiedBucket(const Block& block, const ShardingBucket& b) {
  for (const std::string& g : b.grads) {
    for (const Op* op : block.Consumers(g)) {
      if (op->type() == "allreduce" && op->HasRole(role::kOptimize)) return true;
    }
  }
  return false;
}

// The constant the startup program fills optimizer state `name` with,
// through any slicing (the tensor-parallel pass fills the full state and
// slices it); an error where it is not a constant.
StatusOr<float> ConstantInit(const Block& startup, const std::string& name) {
  std::string var = name;
  for (int hops = 0; hops < 8; ++hops) {
    const std::vector<Op*>& init = startup.Producers(var);
    if (init.size() != 1) break;
    if (init[0]->type() == "fill_constant") return init[0]->GetAttr<float>("value");
    const std::vector<std::string> in = init[0]->InputVars();
    if (in.size() != 1) break;
    var = in[0];
  }
  return Unimplemented("optimizer state '", name, "' does not start as a constant; sharding "
                       "gives each shard a constant start");
}

// Erases the startup ops that made `name` and nothing else still read.
void EraseInit(Block& startup, const std::string& name) {
  std::vector<std::string> todo = {name};
  while (!todo.empty()) {
    const std::string var = todo.back();
    todo.pop_back();
    if (!startup.Consumers(var).empty()) continue;
    for (Op* op : std::vector<Op*>(startup.Producers(var))) {
      const std::vector<std::string> in = op->InputVars();
      startup.EraseOp(op);
      todo.insert(todo.end(), in.begin(), in.end());
    }
    if (var != name) startup.RemoveVar(var);
  }
}

Status ShardingPass::Shard(PassContext& ctx, ShardingBucket& b, std::vector<GatheredBucket>* gathered) {
  Block& block = ctx.program().global_block();
  Block& startup = ctx.startup().global_block();
  const std::string where = StrCat("bucket ", b.grad_buffer);
  proto::VarDesc* g = block.FindVar(b.grad_buffer);
  const DataType dtype = g->dtype();
  const int64_t padded = (g->shape(0) + n_ - 1) / n_ * n_;
  const int64_t shard = padded / n_;
  g->set_shape(0, padded);
  // P: the parameters where their gradients are.
  const std::string base = b.grad_buffer.substr(0, b.grad_buffer.find("@GRAD"));
  const std::string p_buffer = base;
  {
    proto::VarDesc* p = block.AddVar(p_buffer);
    SetMeta(TensorMeta{dtype, {padded}}, p);
    p->set_persistable(true);
    p->set_is_parameter(true);
  }
  for (size_t i = 0; i < b.grads.size(); ++i) {
    proto::VarDesc* param = block.FindVar(b.params[i]);
    if (param->has_flat()) {
      return Internal(where, ": parameter '", b.params[i], "' is in two buckets");
    }
    param->mutable_flat()->set_buffer(p_buffer);
    param->mutable_flat()->set_offset(block.FindVar(b.grads[i])->flat().offset());
  }
  const std::string p_shard = base + ".shard";
  {
    proto::VarDesc* v = block.AddVar(p_shard);
    SetMeta(TensorMeta{dtype, {shard}}, v);
    v->set_persistable(true);
    v->mutable_flat()->set_buffer(p_buffer);
    v->mutable_flat()->set_shard_ring(ring_);
  }
  const bool tied = TiedBucket(block, b);
  // Stage 3: the rank keeps only P.shard; forward and backward gather P
  // when they read it (sharding_gathers.h). A tied bucket, which the
  // first and last stage sum across, stays whole (stage 2).
  const int64_t bytes = padded * SizeOf(dtype);
  // Under AMP a bucket whose readers all cast it is gathered in the
  // compute dtype, whole for the step too (sharding_gathers.h).
  const std::optional<DataType> low =
      stage_ >= 3 && !tied ? LowGatherDtype(block, b.params) : std::nullopt;
  const int64_t gathered_bytes = low ? padded * SizeOf(*low) : bytes;
  const bool kept = stage_ >= 3 && !tied && gathered_bytes <= keep_left_;
  if (kept) {
    keep_left_ -= gathered_bytes;
    ctx.Explain(kPassName, StrCat(p_buffer, " (", gathered_bytes, " bytes) is kept whole for "
                                  "the step (sharding.keep_gathered_bytes): gathered once, ",
                                  low ? StrCat("in ", DataTypeName(*low), ", in the first "
                                               "micro-batch's forward")
                                      : std::string("after its update")));
  }
  const bool regathered = stage_ >= 3 && !tied && (!kept || low);
  if (regathered) {
    proto::VarDesc* p = block.FindVar(p_buffer);
    // Still a parameter, so that split-backward puts the join of its
    // gradients (P@GRAD) with the weight gradients.
    p->set_persistable(false);
    block.FindVar(p_shard)->set_is_parameter(true);
    for (const std::string& param : b.params) block.FindVar(param)->set_persistable(false);
    LOOM_ASSIGN_OR_RETURN(const bool by_all_reduce,
                          FetchByAllReduce(ctx, p_buffer, gathered_bytes));
    gathered->push_back({p_buffer, p_shard, b.params, by_all_reduce, /*once=*/kept, low});
  } else if (stage_ >= 3 && tied) {
    ctx.Explain(kPassName, StrCat(p_buffer, "'s gradients are all-reduced again before the "
                                            "update (a tied embedding's stages, or sequence "
                                            "parallelism's mp ranks): its parameters stay "
                                            "whole (stage 2)"));
  }
  std::vector<proto::OpDesc> after_update;
  std::vector<std::string> gone;  // vars no op reads once the updates are gone
  std::string g_shard;
  if (stage_ >= 2 && !tied) {
    LOOM_ASSIGN_OR_RETURN(g_shard, ScatterGradients(ctx, b, {n_, ring_}, padded, shard, &after_update, &gone));
  } else {
    LOOM_ASSIGN_OR_RETURN(g_shard, ReduceScatterInPlace(ctx, b, {n_, ring_}, shard));
  }

  std::set<std::string> old_state;
  LOOM_ASSIGN_OR_RETURN(proto::OpDesc update,
                        ShardUpdate(ctx, b, base, p_shard, g_shard, shard, &old_state));
  // Writers of the members between the reduce-scatter and the update
  // (the tied embedding's all-reduce) record an event the update waits on;
  // the zeroing of accumulated gradients moves after the update.
  // Found through the block's use-def index, in block order: a scan of the
  // whole block for each bucket made the pass quadratic.
  std::vector<Op*> writers;
  for (const std::string& grad : b.grads) {
    for (Op* op : block.Producers(grad)) {
      if (op->HasRole(role::kOptimize) &&
          std::find(b.updates.begin(), b.updates.end(), op) == b.updates.end()) {
        writers.push_back(op);
      }
    }
  }
  std::sort(writers.begin(), writers.end(),
            [](const Op* x, const Op* y) { return x->index() < y->index(); });
  writers.erase(std::unique(writers.begin(), writers.end()), writers.end());
  std::vector<proto::OpDesc> zeroing;
  for (Op* op : writers) {
    if (op->type() == "fill_constant") {
      zeroing.push_back(op->desc());
      block.EraseOp(op);
      continue;
    }
    const std::string event = StrCat(base, ".ready.", events_++);
    op->annotations().add_record_events(event);
    update.add_wait_events(event);
  }
  Op* anchor = b.updates.back();
  if (replicas_ > 1) {
    LOOM_ASSIGN_OR_RETURN(anchor, AverageAcrossReplicas(ctx, b, g_shard, tied, update, anchor));
  }
  LOOM_ASSIGN_OR_RETURN(Op* placed, InsertOpAfterInferShapes(block, anchor, update));
  Op* after = placed;
  if (!regathered) {
    LOOM_ASSIGN_OR_RETURN(after, FetchAfterUpdate(ctx, placed, p_buffer, p_shard, padded, dtype));
  }
  for (proto::OpDesc& z : zeroing) {
    LOOM_ASSIGN_OR_RETURN(after, InsertOpAfterInferShapes(block, after, std::move(z)));
  }
  for (proto::OpDesc& z : after_update) {
    z.set_pipeline_stage(placed->desc().pipeline_stage());
    z.set_chunk(placed->desc().chunk());
    LOOM_ASSIGN_OR_RETURN(after, InsertOpAfterInferShapes(block, after, std::move(z)));
  }
  for (Op* u : b.updates) block.EraseOp(u);
  for (const std::string& v : gone) {
    EraseInit(startup, v);
    startup.RemoveVar(v);
    block.RemoveVar(v);
  }
  // The members' own state is gone from both programs.
  for (const std::string& s : old_state) {
    EraseInit(startup, s);
    block.RemoveVar(s);
    startup.RemoveVar(s);
  }
  return Status::OK();
}

StatusOr<proto::OpDesc> ShardingPass::ShardUpdate(PassContext& ctx, const ShardingBucket& b,
                                                 const std::string& base,
                                                 const std::string& p_shard,
                                                 const std::string& g_shard, int64_t shard,
                                                 std::set<std::string>* old_state) {
  Block& block = ctx.program().global_block();
  Block& startup = ctx.startup().global_block();
  const std::string where = StrCat("bucket ", b.grad_buffer);
  const Op& like = *b.updates.back();
  proto::OpDesc update = like.desc();
  update.clear_param_grads();
  update.set_creation_pass(kPassName);
  for (const Op* u : b.updates) {
    for (const auto& slot : u->desc().inputs()) {
      if (IsStateSlot(*u, slot)) old_state->insert(slot.vars(0));
    }
  }
  for (auto& slot : *update.mutable_inputs()) {
    if (slot.name() == "Param") {
      slot.set_vars(0, p_shard);
    } else if (slot.name() == "Grad") {
      slot.set_vars(0, g_shard);
    } else if (IsStateSlot(like, slot)) {
      // "layers.0.w.moment1" -> "dp.bucket3.moment1"
      const std::string& old = slot.vars(0);
      const std::string& owner = like.Input("Param");
      const std::string suffix = old.compare(0, owner.size(), owner) == 0
                                     ? old.substr(owner.size())
                                     : StrCat(".", slot.name());
      const std::string name = base + suffix;
      const proto::VarDesc* old_var = block.FindVar(old);
      const bool param_sized = MetaOf(*old_var).shape == MetaOf(*block.FindVar(owner)).shape;
      const Shape shape = param_sized ? Shape{shard} : MetaOf(*old_var).shape;
      LOOM_ASSIGN_OR_RETURN(const float value, ConstantInit(startup, old));
      for (Block* blk : {&block, &startup}) {
        proto::VarDesc* v = blk->AddVar(name);
        SetMeta(TensorMeta{old_var->dtype(), shape}, v);
        v->set_persistable(true);
      }
      LOOM_RETURN_IF_ERROR(AppendOpInferShapes(startup, OpDescBuilder("fill_constant")
                                                            .Output("Out", name)
                                                            .Attr("shape", shape)
                                                            .Attr("value", value)
                                                            .Attr("dtype", static_cast<int32_t>(
                                                                               old_var->dtype())))
                               .status()
                               .WithContext(where));
      for (auto& out : *update.mutable_outputs()) {
        if (out.name() == slot.name() + "Out") out.set_vars(0, name);
      }
      slot.set_vars(0, name);
    }
  }
  for (auto& out : *update.mutable_outputs()) {
    if (out.name() == "ParamOut") out.set_vars(0, p_shard);
  }
  return update;
}

StatusOr<Op*> ShardingPass::AverageAcrossReplicas(PassContext& ctx, const ShardingBucket& b,
                                                 const std::string& g_shard, bool tied,
                                                 const proto::OpDesc& update, Op* anchor) {
  Block& block = ctx.program().global_block();
  const std::string where = StrCat("bucket ", b.grad_buffer);
  // Hybrid sharding: the groups' parts, each the mean over its group,
  // averaged across the groups once a step: in the backward, once the
  // last micro-batch's part is in (it hides under the rest of the
  // backward); a tied bucket's, whose members the stages' all-reduce
  // writes after that, just before its update, waiting as the update does.
  proto::OpDesc across = OpDescBuilder("allreduce")
                             .Input("X", g_shard)
                             .Output("Out", g_shard)
                             .Attr("ring_id", static_cast<int32_t>(kDpReplicaRing))
                             .Attr("reduce_op", std::string("avg"))
                             .Attr(kWireDtypeAttr, b.wire_dtype)
                             .Role(role::kComm);
  across.set_stream(stream::kSharding);
  across.set_creation_pass(kPassName);
  Op* after = anchor;
  if (tied) {
    across.set_role(role::kOptimize | role::kComm);
    for (const std::string& e : update.wait_events()) across.add_wait_events(e);
  } else {
    for (Op* op : block.Producers(g_shard)) {
      if (after == anchor || op->index() > after->index()) after = op;
    }
    if (after == anchor) return Internal(where, ": nothing writes ", g_shard);
    across.set_role(role::kBackward | role::kComm);
    across.set_last_micro_batch_only(true);
  }
  across.set_pipeline_stage(after->desc().pipeline_stage());
  across.set_chunk(after->desc().chunk());
  LOOM_ASSIGN_OR_RETURN(Op* placed_across,
                        InsertOpAfterInferShapes(block, after, std::move(across)));
  return tied ? placed_across : anchor;
}

StatusOr<Op*> ShardingPass::FetchAfterUpdate(PassContext& ctx, Op* placed,
                                             const std::string& p_buffer,
                                             const std::string& p_shard, int64_t padded,
                                             DataType dtype) {
  Block& block = ctx.program().global_block();
  const std::string base = p_buffer;
  LOOM_ASSIGN_OR_RETURN(const bool by_all_reduce,
                        FetchByAllReduce(ctx, p_buffer, padded * SizeOf(dtype)));
  proto::OpDesc gather;
  if (by_all_reduce) {
    // The update writes P.shard, which the all-reduce does not name: an
    // event orders them.
    const std::string updated = StrCat(base, ".updated");
    placed->annotations().add_record_events(updated);
    gather = OpDescBuilder("allreduce")
                 .Input("X", p_buffer)
                 .Output("Out", p_buffer)
                 .Attr("ring_id", static_cast<int32_t>(ring_))
                 .Attr("reduce_op", std::string("sum"))
                 .Attr("fetch_parts", static_cast<int32_t>(n_))
                 .Role(role::kOptimize | role::kComm);
    gather.add_wait_events(updated);
  } else {
    gather = OpDescBuilder("allgather")
                 .Input("X", p_shard)
                 .Output("Out", p_buffer)
                 .Attr("ring_id", static_cast<int32_t>(ring_))
                 .Attr("nranks", static_cast<int32_t>(n_))
                 .Role(role::kOptimize | role::kComm);
  }
  gather.set_stream(stream::kSharding);
  gather.set_pipeline_stage(placed->desc().pipeline_stage());
  gather.set_chunk(placed->desc().chunk());
  return InsertOpAfterInferShapes(block, placed, gather);
}

// "12.3 us", "4.56 ms".
std::string Ms(double s) {
  if (s < 1e-3) return StrCat(std::round(s * 1e7) / 10, " us");
  return StrCat(std::round(s * 1e5) / 100, " ms");
}

StatusOr<bool> ShardingPass::FetchByAllReduce(PassContext& ctx, const std::string& bucket,
                                              int64_t bytes) {
  const std::string& mode = options_.fetch_mode;
  if (mode == "all_gather") return false;
  if (mode == "all_reduce") return true;
  LOOM_ASSIGN_OR_RETURN(const CostContext* costs,
                        ctx.CostsFor("choosing the fetch mode (sharding.fetch_mode auto)"));
  const CommModel* comm = &costs->comm();
  const std::vector<int> group = RingMembers(ctx.layout(), ctx.rank(), ring_);
  const double gather = comm->CommSeconds(CommCall::kAllGather, CommAlgorithm::kDirect,
                                          bytes / n_, group);
  const double reduce =
      comm->CommSeconds(CommCall::kAllReduce, CommAlgorithm::kDirect, bytes, group);
  const bool by_reduce = reduce < gather;
  ctx.Explain(kPassName, StrCat(bucket, " (", bytes, " bytes): fetch by all-gather ", Ms(gather),
                                ", by all-reduce ", Ms(reduce), ": ",
                                by_reduce ? "all-reduce" : "all-gather"));
  return by_reduce;
}

StatusOr<bool> ShardingPass::Run(PassContext& ctx) {
  const ShardingOptions& s = options_;
  ctx.resolved().set_sharding_stage(static_cast<int32_t>(s.stage));
  if (s.stage == 0) {
    ctx.Explain(kPassName, "sharding.stage is 0: nothing sharded");
    return false;
  }
  if (ctx.dp_degree() < 2) {
    return InvalidArgument("sharding.stage ", s.stage, " needs dp.degree of 2 or more");
  }
  const int dp = ctx.dp_degree();
  n_ = s.degree > 0 ? static_cast<int>(s.degree) : dp;
  if (n_ < 2 || dp % n_ != 0) {
    return InvalidArgument("sharding.degree ", n_, " must divide dp.degree (", dp,
                           ") and be at least 2");
  }
  ctx.ResolveShardingDegree(n_);
  ctx.resolved().set_sharding_fetch_mode(s.fetch_mode);
  ctx.resolved().set_sharding_prefetch_depth(static_cast<int32_t>(s.prefetch_depth));
  ctx.resolved().set_sharding_keep_gathered_bytes(s.keep_gathered_bytes);
  ring_ = ctx.layout().sharding > 0 ? kShardingRing : kDpRing;
  replicas_ = dp / n_;
  stage_ = static_cast<int>(s.stage);
  keep_left_ = s.keep_gathered_bytes < 0 ? std::numeric_limits<int64_t>::max()
                                         : s.keep_gathered_bytes;
  Block& block = ctx.program().global_block();
  std::map<std::string, std::string> param_of;  // grad -> param
  std::map<std::string, Op*> update_of;         // param -> its update
  for (Op* op : block.ops()) {
    for (const proto::ParamGrad& pg : op->desc().param_grads()) param_of[pg.grad()] = pg.param();
    if (op->HasRole(role::kOptimize) && op->HasInput("Param") && op->HasOutput("ParamOut")) {
      update_of[op->Input("Param")] = op;
    }
  }
  std::vector<ShardingBucket> buckets;
  for (Op* op : block.ops()) {
    if (op->type() != "allreduce" || op->GetAttr<int32_t>("ring_id") != kDpRing ||
        !op->HasRole(role::kBackward)) {
      continue;
    }
    ShardingBucket b;
    b.allreduce = op;
    if (op->HasAttr(kWireDtypeAttr)) b.wire_dtype = op->GetAttr<std::string>(kWireDtypeAttr);
    b.grads = op->InputVars();
    for (const std::string& g : b.grads) {
      const proto::VarDesc* var = block.FindVar(g);
      if (var == nullptr || !var->has_flat()) {
        return FailedPrecondition(op->Location(), ": gradient '", g,
                                  "' is in no flat buffer (the data-parallel pass makes them)");
      }
      if (b.grad_buffer.empty()) b.grad_buffer = var->flat().buffer();
      if (var->flat().buffer() != b.grad_buffer) {
        return FailedPrecondition(op->Location(), ": the bucket's gradients are in two buffers");
      }
      auto p = param_of.find(g);
      auto u = p == param_of.end() ? update_of.end() : update_of.find(p->second);
      if (u == update_of.end()) {
        return FailedPrecondition(op->Location(), ": gradient '", g,
                                  "' has no parameter update to shard");
      }
      b.params.push_back(p->second);
      b.updates.push_back(u->second);
    }
    std::sort(b.updates.begin(), b.updates.end(),
              [](const Op* x, const Op* y) { return x->index() < y->index(); });
    const proto::OpDesc& first = b.updates.front()->desc();
    for (const Op* u : b.updates) {
      if (u->type() != first.type() ||
          u->desc().attrs().size() != first.attrs().size()) {
        return FailedPrecondition(op->Location(), ": the bucket mixes updates (",
                                  first.type(), " and ", u->type(), ")");
      }
    }
    buckets.push_back(std::move(b));
  }
  std::vector<GatheredBucket> gathered;
  for (ShardingBucket& b : buckets) LOOM_RETURN_IF_ERROR(Shard(ctx, b, &gathered));
  const auto once = std::count_if(gathered.begin(), gathered.end(),
                                  [](const GatheredBucket& g) { return g.once; });
  if (!gathered.empty()) {
    LOOM_RETURN_IF_ERROR(InsertParameterGathers(ctx, gathered, n_, ring_,
                                                static_cast<int>(s.prefetch_depth)));
  }
  ctx.Explain(kPassName, StrCat("stage ", s.stage, ": ", buckets.size(),
                                " buckets' optimizer state split over ", n_, " dp ranks",
                                replicas_ > 1 ? StrCat(" and replicated ", replicas_, " times")
                                              : std::string(),
                                " (each reduce-scattered and updated by shard; ",
                                gathered.size(), " gathered before use",
                                once > 0 ? StrCat(", ", once, " of them once a step") : "", ", ",
                                buckets.size() - gathered.size(), " after the update)"));
  return !buckets.empty();
}

}  // namespace

PassInfo ShardingPassInfo() {
  using O = ShardingOptions;
  PassInfo info = PassInfoOf<ShardingPass, O>(
      kPassName,
      "ZeRO stages 1-3: each dp rank updates 1/N of every gradient bucket (reduce-scatter, "
      "sharded update, all-gather, in place on flat buffers); stage 2 keeps 1/N of the "
      "gradients, stage 3 of the parameters too (gathered before each use)");
  info.options = {
      IntOption(&O::stage, "stage", "the ZeRO stage (0: off)", 0, 3),
      IntOption(&O::degree, "degree",
                "dp ranks sharing one state, a divisor of the dp degree (0: all of them)", 0,
                kMaxPassDegree),
      ChoiceOption(&O::fetch_mode, "fetch-mode",
                   "how a bucket's parameters are made whole (auto: the cheaper, by the comm "
                   "model)",
                   {"all_gather", "all_reduce", "auto"}),
      IntOption(&O::prefetch_depth, "prefetch-depth",
                "stage 3: buckets gathered ahead of the one being read", 0, kMaxWorldSize),
      IntOption(&O::keep_gathered_bytes, "keep-gathered-bytes",
                "stage 3: bytes of buckets kept gathered for the step (-1: all)", -1)};
  info.check = OptionsCheck<O>([](const O& o) -> Status {
    if (o.keep_gathered_bytes != 0 && o.stage != 3) {
      return InvalidArgument("option keep-gathered-bytes is ", o.keep_gathered_bytes,
                             " but stage is ", o.stage,
                             " (only stage 3 gathers parameters before use)");
    }
    return Status::OK();
  });
  info.requires_passes = {"data-parallel"};
  return info;
}

}  // namespace loom
