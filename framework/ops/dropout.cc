// dropout with a counter-based mask, and its gradient.
#include "framework/ops/op_helpers.h"

namespace loom {
namespace {

// full_shape and shard_offsets describe X as a shard of a logical full
// tensor, past its batch dim: each empty (X is whole; offsets 0) or one
// entry per dim 1.., with the shard inside the full extents.
Status CheckShard(const InferShapeContext& ctx, const TensorMeta& x) {
  const auto full = ctx.Attr<std::vector<int64_t>>("full_shape");
  const auto offsets = ctx.Attr<std::vector<int64_t>>("shard_offsets");
  const size_t row_dims = x.shape.empty() ? 0 : x.shape.size() - 1;
  for (const auto& [name, attr] : {std::pair{"full_shape", &full},
                                   std::pair{"shard_offsets", &offsets}}) {
    if (!attr->empty() && attr->size() != row_dims) {
      return InvalidArgument(name, " ", ShapeToString(*attr), " has ", attr->size(),
                             " entries but X ", MetaToString(x), " has ", row_dims,
                             " dims past its batch dim");
    }
  }
  if (!offsets.empty() && full.empty()) {
    return InvalidArgument("shard_offsets ", ShapeToString(offsets),
                           " is set without full_shape");
  }
  // The kernel counts an element's index in the full row in int64.
  double row = 1;
  for (int64_t extent : full) row *= static_cast<double>(extent);
  if (row > 0x1p62) {
    return InvalidArgument("full_shape ", ShapeToString(full), " holds ", row,
                           " elements a row, more than an int64 index counts");
  }
  for (size_t d = 0; d < full.size(); ++d) {
    const int64_t at = offsets.empty() ? 0 : offsets[d];
    // (Written so as not to overflow; the entries' ranges are checked
    // before shapes are inferred.)
    if (at < 0 || (x.shape[d + 1] >= 0 && at > full[d] - x.shape[d + 1])) {
      return InvalidArgument("X ", MetaToString(x), " at shard_offsets ",
                             ShapeToString(offsets.empty() ? Shape(row_dims, 0) : offsets),
                             " reaches past full_shape ", ShapeToString(full), " in dim ",
                             d + 1);
    }
  }
  return Status::OK();
}

}  // namespace

void RegisterDropoutOps() {
  OpRegistry::Global().Register(
      OpSchema("dropout")
          .Input("X")
          .Output("Out")
          .Output("Mask")
          .Attr<float>("dropout_prob", 0.5f)
          .AttrRange("dropout_prob", 0, 1, false, /*hi_open=*/true)
          .Attr<int64_t>("seed", 0)
          .Attr<bool>("is_test", false)
          .Attr<std::vector<int64_t>>("full_shape", {})
          .AttrRange("full_shape", 1, kFiniteMax)
          .Attr<std::vector<int64_t>>("shard_offsets", {})
          .AttrRange("shard_offsets", 0, kFiniteMax)
          .SetInferShape([](InferShapeContext& ctx) -> Status {
            // (dropout_prob's range is the schema's: CheckOpSchema.)
            const TensorMeta& x = ctx.Input("X");
            if (!IsFloating(x.dtype)) {
              return InvalidArgument("X must be floating but is ",
                                     MetaToString(x));
            }
            LOOM_RETURN_IF_ERROR(CheckShard(ctx, x));
            ctx.ShareMeta("X", "Out");
            ctx.SetOutput("Mask", TensorMeta{proto::BOOL, x.shape});
            return Status::OK();
          })
          .SetGradMaker([](const proto::OpDesc& fwd) {
            return std::vector<proto::OpDesc>{
                MakeGradOp(fwd, "dropout_grad", {}, {"Mask"}, {"Out"}, {"X"})};
          })
          .Doc("Upscale-in-train dropout: Out = X * Mask / (1 - dropout_prob), "
               "Mask (bool) true where kept. Dim 0 of X is the batch (rows); "
               "an element is kept iff a counter-based hash (splitmix64, no "
               "RNG state) of (seed, step, global row, index in the full "
               "row), mapped to [0, 1), is >= dropout_prob. The step and the "
               "global row of X's row 0 come from the executor at run time "
               "(the trainer's step; where a dp replica's micro-batch starts "
               "in the global batch); the index in the full row places the "
               "element in the row of the logical full tensor: X is the "
               "shard at shard_offsets of a tensor whose dims past the batch "
               "are full_shape (both empty: X is whole), as the "
               "tensor-parallel pass records where it splits X (attention "
               "heads). So every layout, micro-batch split and schedule "
               "draws serial training's mask, each step a fresh one, and "
               "ranks holding a replicated X draw the same. is_test or "
               "dropout_prob = 0 passes X through, Mask all true."));
  OpRegistry::Global().Register(
      OpSchema("dropout_grad")
          .Input("Mask")
          .Input(GradSlot("Out"))
          .Output(GradSlot("X"))
          .Attr<float>("dropout_prob", 0.5f)
          .AttrRange("dropout_prob", 0, 1, false, /*hi_open=*/true)
          // The forward's attributes, copied by autodiff; the mask is read,
          // not drawn, so only dropout_prob and is_test matter here.
          .Attr<int64_t>("seed", 0)
          .Attr<bool>("is_test", false)
          .Attr<std::vector<int64_t>>("full_shape", {})
          .Attr<std::vector<int64_t>>("shard_offsets", {})
          .SetInferShape([](InferShapeContext& ctx) -> Status {
            const TensorMeta& mask = ctx.Input("Mask");
            const TensorMeta& dout = ctx.Input(GradSlot("Out"));
            if (mask.dtype != proto::BOOL || mask.shape != dout.shape) {
              return InvalidArgument("Mask is ", MetaToString(mask),
                                     " but Out@GRAD is ", MetaToString(dout),
                                     "; Mask must be bool of the same shape");
            }
            ctx.ShareMeta(GradSlot("Out"), GradSlot("X"));
            return Status::OK();
          })
          .Doc("X@GRAD = Out@GRAD * Mask / (1 - dropout_prob); Out@GRAD "
               "itself under is_test."));
}

}  // namespace loom
