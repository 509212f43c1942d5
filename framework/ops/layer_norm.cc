// layer_norm over the trailing dims [begin_norm_axis, rank), and its
// gradient.
#include "framework/ops/op_helpers.h"

namespace loom {
namespace {

// Splits X at begin_norm_axis: `rows` is X's shape before it (the shape of
// Mean and Variance), `norm` the normalized dims.
struct NormSplit {
  Shape rows;
  Shape norm;
};

StatusOr<NormSplit> SplitAtNormAxis(const InferShapeContext& ctx,
                                    const TensorMeta& x) {
  LOOM_RETURN_IF_ERROR(CheckComputeFloat("X", x));
  const int rank = static_cast<int>(x.shape.size());
  const int attr = ctx.Attr<int32_t>("begin_norm_axis");
  auto axis = NormalizeAxis(attr, rank);
  if (!axis.ok()) {
    return InvalidArgument("begin_norm_axis ", attr,
                           " is out of range for X ", ShapeToString(x.shape));
  }
  return NormSplit{Shape(x.shape.begin(), x.shape.begin() + *axis),
                   Shape(x.shape.begin() + *axis, x.shape.end())};
}

// Scale and Bias are the normalized dims flattened: [H].
Status CheckAffine(const InferShapeContext& ctx, const std::string& slot,
                   const NormSplit& split) {
  if (!ctx.HasInput(slot)) return Status::OK();
  const TensorMeta& m = ctx.Input(slot);
  const Shape want{NumElements(split.norm)};
  if (m.dtype != proto::FP32 || m.shape != want) {
    return InvalidArgument(slot, " is ", MetaToString(m),
                           " but normalizing over ",
                           ShapeToString(split.norm), " needs ",
                           MetaToString(TensorMeta{proto::FP32, want}));
  }
  return Status::OK();
}

Status InferLayerNorm(InferShapeContext& ctx) {
  const TensorMeta& x = ctx.Input("X");
  LOOM_ASSIGN_OR_RETURN(NormSplit split, SplitAtNormAxis(ctx, x));
  LOOM_RETURN_IF_ERROR(CheckAffine(ctx, "Scale", split));
  LOOM_RETURN_IF_ERROR(CheckAffine(ctx, "Bias", split));
  ctx.SetOutput("Y", x);
  ctx.SetOutput("Mean", TensorMeta{proto::FP32, split.rows});
  ctx.SetOutput("Variance", TensorMeta{proto::FP32, split.rows});
  return Status::OK();
}

Status InferLayerNormGrad(InferShapeContext& ctx) {
  const TensorMeta& x = ctx.Input("X");
  LOOM_ASSIGN_OR_RETURN(NormSplit split, SplitAtNormAxis(ctx, x));
  ctx.SetOutput(GradSlot("X"), x);
  // Bias is not an input of the grad op; its gradient has Scale's meta.
  const TensorMeta affine{proto::FP32, {NumElements(split.norm)}};
  ctx.SetOutput(GradSlot("Scale"), affine);
  ctx.SetOutput(GradSlot("Bias"), affine);
  return Status::OK();
}

OpSchema& LayerNormAttrs(OpSchema& s) {
  return s.Attr<float>("epsilon", 1e-5f)
      .AttrRange("epsilon", 0, kFiniteMax, /*lo_open=*/true)
      .Attr<int32_t>("begin_norm_axis", -1);
}

}  // namespace

void RegisterLayerNormOps() {
  OpSchema fwd("layer_norm");
  fwd.Input("X")
      .Input("Scale", SlotSpec::kOptional)
      .Input("Bias", SlotSpec::kOptional)
      .Output("Y")
      // Saved statistics for the gradient; no gradient flows back through
      // them.
      .Output("Mean", SlotSpec::kNoGrad)
      .Output("Variance", SlotSpec::kNoGrad)
      .SetInferShape(InferLayerNorm)
      .SetGradMaker([](const proto::OpDesc& f) {
        return std::vector<proto::OpDesc>{
            MakeGradOp(f, "layer_norm_grad", {"X", "Scale"},
                       {"Mean", "Variance"}, {"Y"}, {"X", "Scale", "Bias"})};
      })
      .Doc("Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias, with the "
           "statistics over dims [begin_norm_axis, rank).");
  OpRegistry::Global().Register(std::move(LayerNormAttrs(fwd)));

  OpSchema grad("layer_norm_grad");
  grad.Input("X")
      .Input("Scale", SlotSpec::kOptional)
      .Input("Mean")
      .Input("Variance")
      .Input(GradSlot("Y"))
      .Output(GradSlot("X"), SlotSpec::kOptional)
      .Output(GradSlot("Scale"), SlotSpec::kOptional)
      .Output(GradSlot("Bias"), SlotSpec::kOptional)
      .SetInferShape(InferLayerNormGrad)
      .Doc("Gradient of layer_norm; Scale and Bias gradients sum the rows in "
           "order.");
  OpRegistry::Global().Register(std::move(LayerNormAttrs(grad)));
}

}  // namespace loom
