// Parameter update ops: sgd and adamw. They run after the backward pass and
// are never differentiated, so they have no grad makers.
#include "framework/ops/op_helpers.h"

namespace loom {
namespace {

// `slot` must have Param's meta.
Status CheckLikeParam(const InferShapeContext& ctx, const std::string& slot) {
  const TensorMeta& param = ctx.Input("Param");
  const TensorMeta& t = ctx.Input(slot);
  if (t != param) {
    return InvalidArgument(slot, " is ", MetaToString(t), " but Param is ",
                           MetaToString(param));
  }
  return Status::OK();
}

// `slot` must hold one fp32 value.
Status CheckScalar(const InferShapeContext& ctx, const std::string& slot) {
  const TensorMeta& t = ctx.Input(slot);
  if (t.dtype != proto::FP32 || NumElements(t.shape) != 1) {
    return InvalidArgument(slot, " must be fp32[1] but is ", MetaToString(t));
  }
  return Status::OK();
}

Status CheckParam(const InferShapeContext& ctx) {
  const TensorMeta& param = ctx.Input("Param");
  if (!IsFloating(param.dtype)) {
    return InvalidArgument("Param must be floating but is ",
                           MetaToString(param));
  }
  LOOM_RETURN_IF_ERROR(CheckLikeParam(ctx, "Grad"));
  if (ctx.HasInput("GradScale")) LOOM_RETURN_IF_ERROR(CheckScalar(ctx, "GradScale"));
  return CheckScalar(ctx, "LearningRate");
}

constexpr char kGradScaleDoc[] =
    " With GradScale (grad_scale's output) the update uses GradScale * Grad; a GradScale that "
    "is not finite skips the update: every output keeps its input's value.";

}  // namespace

void RegisterOptimizerOps() {
  OpRegistry::Global().Register(
      OpSchema("sgd")
          .Input("Param")
          .Input("Grad")
          .Input("LearningRate")
          .Input("GradScale", SlotSpec::kOptional)
          .Output("ParamOut")
          .SetInferShape([](InferShapeContext& ctx) -> Status {
            LOOM_RETURN_IF_ERROR(CheckParam(ctx));
            ctx.ShareMeta("Param", "ParamOut");
            return Status::OK();
          })
          .Doc("ParamOut = Param - LearningRate * Grad. ParamOut is normally "
               "Param itself (in place)." + std::string(kGradScaleDoc)));
  OpRegistry::Global().Register(
      OpSchema("adamw")
          .Input("Param")
          .Input("Grad")
          .Input("LearningRate")
          .Input("Moment1")
          .Input("Moment2")
          .Input("Beta1Pow")
          .Input("Beta2Pow")
          .Input("GradScale", SlotSpec::kOptional)
          .Output("ParamOut")
          .Output("Moment1Out")
          .Output("Moment2Out")
          .Output("Beta1PowOut")
          .Output("Beta2PowOut")
          .Attr<float>("beta1", 0.9f)
          .Attr<float>("beta2", 0.999f)
          .Attr<float>("epsilon", 1e-8f)
          .Attr<float>("weight_decay", 0.01f)
          .AttrRange("beta1", 0, 1, false, /*hi_open=*/true)
          .AttrRange("beta2", 0, 1, false, /*hi_open=*/true)
          .AttrRange("epsilon", 0, kFiniteMax, /*lo_open=*/true)
          .AttrRange("weight_decay", 0, kFiniteMax)
          .SetInferShape([](InferShapeContext& ctx) -> Status {
            LOOM_RETURN_IF_ERROR(CheckParam(ctx));
            LOOM_RETURN_IF_ERROR(CheckLikeParam(ctx, "Moment1"));
            LOOM_RETURN_IF_ERROR(CheckLikeParam(ctx, "Moment2"));
            LOOM_RETURN_IF_ERROR(CheckScalar(ctx, "Beta1Pow"));
            LOOM_RETURN_IF_ERROR(CheckScalar(ctx, "Beta2Pow"));
            ctx.ShareMeta("Param", "ParamOut");
            ctx.ShareMeta("Moment1", "Moment1Out");
            ctx.ShareMeta("Moment2", "Moment2Out");
            ctx.ShareMeta("Beta1Pow", "Beta1PowOut");
            ctx.ShareMeta("Beta2Pow", "Beta2PowOut");
            return Status::OK();
          })
          .Doc("Adam with decoupled weight decay (AdamW). At step t = 1, 2, "
               "...: p -= lr * weight_decay * p; m = beta1 m + (1 - beta1) g; "
               "v = beta2 v + (1 - beta2) g^2; p -= lr * (m / (1 - Beta1Pow)) "
               "/ (sqrt(v / (1 - Beta2Pow)) + epsilon); then Beta1PowOut = "
               "Beta1Pow * beta1 and Beta2PowOut = Beta2Pow * beta2. "
               "Beta1Pow and Beta2Pow hold beta^t for the current step t, so "
               "they start at beta1 and beta2 (beta^1), not at 1. The outputs "
               "are normally the inputs themselves (in place)." +
               std::string(kGradScaleDoc)));
}

}  // namespace loom
