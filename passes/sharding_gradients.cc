#include "passes/sharding_gradients.h"

#include "framework/op_builder.h"
#include "framework/shape_inference.h"
#include "framework/wire_dtype.h"

namespace loom {
namespace {

constexpr const char* kPassName = "sharding";

}  // namespace

StatusOr<std::string> ReduceScatterInPlace(PassContext& ctx, const ShardingBucket& b,
                                           const ShardGroup& group, int64_t shard) {
  Block& block = ctx.program().global_block();
  const DataType dtype = block.FindVar(b.grad_buffer)->dtype();
  // Named as a gradient of P, so that split-backward puts the reduce-scatter
  // in the W half with the gradients it reduces.
  const std::string g_shard = b.grad_buffer + "@SHARD";
  proto::VarDesc* v = block.AddVar(g_shard);
  SetMeta(TensorMeta{dtype, {shard}}, v);
  v->set_persistable(true);
  v->mutable_flat()->set_buffer(b.grad_buffer);
  v->mutable_flat()->set_shard_ring(group.ring);
  proto::OpDesc rs = OpDescBuilder("reduce_scatter")
                         .Input("X", b.grad_buffer)
                         .Input("Members", b.grads)
                         .Output("Out", g_shard)
                         .Attr("ring_id", static_cast<int32_t>(group.ring))
                         .Attr("nranks", static_cast<int32_t>(group.n))
                         .Attr("reduce_op", std::string("avg"))
                         .Attr(kWireDtypeAttr, b.wire_dtype)
                         .Role(role::kBackward | role::kComm);
  rs.set_stream(stream::kSharding);
  rs.set_pipeline_stage(b.allreduce->desc().pipeline_stage());
  rs.set_chunk(b.allreduce->desc().chunk());
  rs.set_last_micro_batch_only(b.allreduce->desc().last_micro_batch_only());
  LOOM_RETURN_IF_ERROR(InsertOpAfterInferShapes(block, b.allreduce, rs).status());
  block.EraseOp(b.allreduce);
  return g_shard;
}

StatusOr<std::string> ScatterGradients(PassContext& ctx, const ShardingBucket& b,
                                       const ShardGroup& group, int64_t padded, int64_t shard,
                                       std::vector<proto::OpDesc>* after_update,
                                       std::vector<std::string>* gone) {
  Block& block = ctx.program().global_block();
  Block& startup = ctx.startup().global_block();
  const std::string where = StrCat("bucket ", b.grad_buffer);
  const bool accumulating = ctx.micro_batches() > 1;
  proto::VarDesc* g = block.FindVar(b.grad_buffer);
  const DataType dtype = g->dtype();
  auto placed = [&](proto::OpDesc d) {
    d.set_pipeline_stage(b.allreduce->desc().pipeline_stage());
    d.set_chunk(b.allreduce->desc().chunk());
    d.set_creation_pass(kPassName);
    return d;
  };
  std::vector<std::string> parts;
  int64_t filled = 0;
  for (const std::string& name : b.grads) {
    proto::VarDesc* var = block.FindVar(name);
    filled += NumElements(MetaOf(*var).shape);
    if (!accumulating) {
      var->clear_flat();
      var->set_persistable(false);
      parts.push_back(name);
      continue;
    }
    // An accumulator (acc = acc + this micro-batch's gradient): the join
    // takes the micro-batch's gradient; the accumulator, its add and its
    // zeroing go.
    Op* add = nullptr;
    for (Op* op : block.Producers(name)) {
      if (op->type() == "elementwise_add" && op->HasRole(role::kBackward) &&
          op->Input("X") == name) {
        add = op;
      }
    }
    if (add == nullptr) {
      return FailedPrecondition(where, ": accumulator '", name, "' has no accumulating add");
    }
    parts.push_back(add->Input("Y"));
    block.EraseOp(add);
    for (Op* op : std::vector<Op*>(block.Producers(name))) {
      if (op->HasRole(role::kOptimize) && op->type() == "fill_constant") block.EraseOp(op);
    }
    gone->push_back(name);
  }
  std::vector<proto::OpDesc> ops;
  if (padded > filled) {
    const std::string pad = b.grad_buffer + "@PAD";
    SetMeta(TensorMeta{dtype, {padded - filled}}, block.AddVar(pad));
    ops.push_back(placed(OpDescBuilder("fill_constant")
                             .Output("Out", pad)
                             .Attr("shape", Shape{padded - filled})
                             .Attr("dtype", static_cast<int32_t>(dtype))
                             .Attr("value", 0.0f)
                             .Role(role::kBackward)));
    parts.push_back(pad);
  }
  g->set_persistable(false);
  ops.push_back(placed(OpDescBuilder("flat_concat")
                           .Input("X", parts)
                           .Output("Out", b.grad_buffer)
                           .Role(role::kBackward)));
  const std::string g_shard = b.grad_buffer + "@SHARD";
  for (Block* blk : {&block, &startup}) {
    proto::VarDesc* v = blk->AddVar(g_shard);
    SetMeta(TensorMeta{dtype, {shard}}, v);
    v->set_persistable(true);
  }
  LOOM_RETURN_IF_ERROR(AppendOpInferShapes(startup, OpDescBuilder("fill_constant")
                                                        .Output("Out", g_shard)
                                                        .Attr("shape", Shape{shard})
                                                        .Attr("dtype", static_cast<int32_t>(dtype))
                                                        .Attr("value", 0.0f))
                           .status());
  const std::string scattered = accumulating ? b.grad_buffer + "@SCATTER" : g_shard;
  if (accumulating) SetMeta(TensorMeta{dtype, {shard}}, block.AddVar(scattered));
  proto::OpDesc rs = placed(OpDescBuilder("reduce_scatter")
                                .Input("X", b.grad_buffer)
                                .Output("Out", scattered)
                                .Attr("ring_id", static_cast<int32_t>(group.ring))
                                .Attr("nranks", static_cast<int32_t>(group.n))
                                .Attr("reduce_op", std::string("avg"))
                                .Attr(kWireDtypeAttr, b.wire_dtype)
                                .Role(role::kBackward | role::kComm));
  rs.set_stream(stream::kSharding);
  ops.push_back(rs);
  if (accumulating) {
    // On the sharding stream too, so that calc never waits for the
    // reduce-scatter of the micro-batch it has moved past.
    proto::OpDesc sum = placed(OpDescBuilder("elementwise_add")
                                   .Input("X", g_shard)
                                   .Input("Y", scattered)
                                   .Output("Out", g_shard)
                                   .Role(role::kBackward));
    sum.set_stream(stream::kSharding);
    ops.push_back(sum);
    after_update->push_back(OpDescBuilder("fill_constant")
                                .Output("Out", g_shard)
                                .Attr("shape", Shape{shard})
                                .Attr("dtype", static_cast<int32_t>(dtype))
                                .Attr("value", 0.0f)
                                .Role(role::kOptimize));
  }
  Op* at = b.allreduce;
  for (proto::OpDesc& d : ops) {
    LOOM_ASSIGN_OR_RETURN(at, InsertOpAfterInferShapes(block, at, std::move(d)));
  }
  block.EraseOp(b.allreduce);
  return g_shard;
}

}  // namespace loom
