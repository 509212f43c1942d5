// lookup_table: the embedding lookup, and its dense gradient. With
// start_index >= 0 the table is one shard of a vocabulary-parallel table.
#include "framework/ops/op_helpers.h"

namespace loom {
namespace {

Status CheckTableAndIds(const InferShapeContext& ctx) {
  const TensorMeta& w = ctx.Input("W");
  const TensorMeta& ids = ctx.Input("Ids");
  if (w.shape.size() != 2) {
    return InvalidArgument("W must be a [vocab, hidden] table but is ",
                           MetaToString(w));
  }
  if (ids.dtype != proto::INT64) {
    return InvalidArgument("Ids must be int64 but is ", MetaToString(ids));
  }
  const int64_t start = ctx.Attr<int64_t>("start_index");
  if (start < -1) {
    return InvalidArgument("attribute start_index is ", start,
                           ", must be -1 (unsharded) or >= 0");
  }
  const int64_t padding = ctx.Attr<int64_t>("padding_idx");
  if (start == -1) {
    if (padding != -1 && (padding < 0 || padding >= w.shape[0])) {
      return InvalidArgument("attribute padding_idx ", padding,
                             " is out of range [0, ", w.shape[0], ") of W ",
                             ShapeToString(w.shape), " (-1 means no padding)");
    }
  } else if (padding < -1) {
    // A global id: the shard does not know the vocabulary's full size.
    return InvalidArgument("attribute padding_idx is ", padding,
                           ", must be a global id >= 0 or -1 for no padding");
  }
  return Status::OK();
}

}  // namespace

void RegisterEmbeddingOps() {
  OpRegistry::Global().Register(
      OpSchema("lookup_table")
          .Input("W")
          .Input("Ids", SlotSpec::kNoGrad)
          .Output("Out")
          .Attr<int64_t>("padding_idx", -1)
          .Attr<int64_t>("start_index", -1)
          .SetInferShape([](InferShapeContext& ctx) -> Status {
            LOOM_RETURN_IF_ERROR(CheckTableAndIds(ctx));
            const TensorMeta& w = ctx.Input("W");
            Shape out = ctx.Input("Ids").shape;
            out.push_back(w.shape[1]);
            ctx.SetOutput("Out", TensorMeta{w.dtype, out});
            return Status::OK();
          })
          .SetGradMaker([](const proto::OpDesc& fwd) {
            return std::vector<proto::OpDesc>{MakeGradOp(
                fwd, "lookup_table_grad", {"W", "Ids"}, {}, {"Out"}, {"W"})};
          })
          .Doc("Out[..., :] = W[Ids[...], :]: Out has shape Ids.shape + "
               "[hidden]. Positions whose id is padding_idx (unless -1) get "
               "zeros and give W no gradient. With start_index -1 (the "
               "default) an id outside [0, vocab) is a run-time error naming "
               "its position. With start_index >= 0, W holds rows "
               "[start_index, start_index + vocab) of a table sharded over "
               "the vocabulary (Megatron's vocab-parallel embedding): an id in "
               "that range reads W[id - start_index], any other id gets zeros "
               "and gives W no gradient, and a negative id is still an error. "
               "padding_idx is a global id either way. Summing Out over the "
               "shards (an allreduce) gives the unsharded lookup."));
  OpRegistry::Global().Register(
      OpSchema("lookup_table_grad")
          .Input("W", SlotSpec::kNoBuffer)
          .Input("Ids", SlotSpec::kNoGrad)
          .Input(GradSlot("Out"))
          .Output(GradSlot("W"))
          .Attr<int64_t>("padding_idx", -1)
          .Attr<int64_t>("start_index", -1)
          .SetInferShape([](InferShapeContext& ctx) -> Status {
            LOOM_RETURN_IF_ERROR(CheckTableAndIds(ctx));
            Shape expected = ctx.Input("Ids").shape;
            expected.push_back(ctx.Input("W").shape[1]);
            const TensorMeta& dout = ctx.Input(GradSlot("Out"));
            if (dout.shape != expected) {
              return InvalidArgument("Out@GRAD is ", MetaToString(dout),
                                     " but Ids and W give ",
                                     ShapeToString(expected));
            }
            ctx.ShareMeta("W", GradSlot("W"));
            return Status::OK();
          })
          .Doc("Dense W@GRAD: zeros, plus each Out@GRAD row added to the row "
               "of its id, in id-position order so the sum is reproducible. "
               "With start_index >= 0 (a vocabulary shard) id maps to row "
               "id - start_index, and ids outside the shard add nothing."));
}

}  // namespace loom
