// The global gradient norm and what the updates scale gradients by
// (framework/grad_clip.h): squared_l2_norm sums the squares of the
// gradients this rank counts, grad_scale turns the total into the factor
// the updates multiply their gradient by (clipping, and undoing a loss
// scale). Neither has a gradient: both run after the backward.
#include "framework/ops/op_helpers.h"

namespace loom {
namespace {

Status CheckScalarFp32(const std::string& slot, const TensorMeta& t) {
  if (t.dtype != proto::FP32 || NumElements(t.shape) != 1) {
    return InvalidArgument(slot, " must be fp32[1] but is ", MetaToString(t));
  }
  return Status::OK();
}

Status InferSquaredL2Norm(InferShapeContext& ctx) {
  const int n = ctx.InputCount("X");
  for (int i = 0; i < n; ++i) {
    LOOM_RETURN_IF_ERROR(CheckComputeFloat(StrCat("X[", i, "]"), ctx.Input("X", i)));
  }
  const auto rings = ctx.Attr<std::vector<int32_t>>("part_rings");
  if (!rings.empty() && static_cast<int>(rings.size()) != n) {
    return InvalidArgument("part_rings has ", rings.size(), " entries for ", n, " inputs");
  }
  const auto segments = ctx.Attr<std::vector<int64_t>>("segments");
  if (segments.size() % 3 != 0) {
    return InvalidArgument("segments holds (input, begin, end) triples, but has ",
                           segments.size(), " values");
  }
  for (size_t s = 0; s < segments.size(); s += 3) {
    const int64_t input = segments[s], begin = segments[s + 1], end = segments[s + 2];
    if (input < 0 || input >= n || begin < 0 || (end < begin && end != -1)) {
      return InvalidArgument("segment ", s / 3, " (", input, ", ", begin, ", ", end,
                             ") is not an input's [begin, end)");
    }
    // A part's segments are in its buffer's coordinates, which only the
    // rank knows the extent of; a whole input's must lie inside it.
    const bool part = !rings.empty() && rings[input] >= 0;
    if (!part && end > NumElements(ctx.Input("X", input).shape)) {
      return InvalidArgument("segment ", s / 3, " ends at ", end, " past X[", input, "]'s ",
                             NumElements(ctx.Input("X", input).shape), " elements");
    }
  }
  ctx.SetOutput("Out", TensorMeta{proto::FP32, {1}});
  return Status::OK();
}

Status InferGradScale(InferShapeContext& ctx) {
  LOOM_RETURN_IF_ERROR(CheckScalarFp32("SquaredNorm", ctx.Input("SquaredNorm")));
  if (ctx.HasInput("LossScale")) {
    LOOM_RETURN_IF_ERROR(CheckScalarFp32("LossScale", ctx.Input("LossScale")));
  }
  ctx.SetOutput("Scale", TensorMeta{proto::FP32, {1}});
  ctx.SetOutput("Norm", TensorMeta{proto::FP32, {1}});
  return Status::OK();
}

Status InferUpdateLossScale(InferShapeContext& ctx) {
  LOOM_RETURN_IF_ERROR(CheckScalarFp32("SquaredNorm", ctx.Input("SquaredNorm")));
  LOOM_RETURN_IF_ERROR(CheckScalarFp32("LossScale", ctx.Input("LossScale")));
  const TensorMeta& good = ctx.Input("GoodSteps");
  if (good.dtype != proto::INT64 || NumElements(good.shape) != 1) {
    return InvalidArgument("GoodSteps must be int64[1] but is ", MetaToString(good));
  }
  ctx.ShareMeta("LossScale", "LossScaleOut");
  ctx.ShareMeta("GoodSteps", "GoodStepsOut");
  return Status::OK();
}

}  // namespace

void RegisterGradNormOps() {
  OpRegistry::Global().Register(
      OpSchema("squared_l2_norm")
          .Input("X", SlotSpec::kDuplicable | SlotSpec::kOptional)
          .Output("Out")
          .Attr<std::vector<int64_t>>("segments", {})
          .Attr<std::vector<int32_t>>("part_rings", {})
          .SetInferShape(InferSquaredL2Norm)
          .Doc("Out = the sum of the squares of X's elements, accumulated in double in input "
               "order and rounded once. segments, (input, begin, end) triples, restricts the "
               "sum to those element ranges, in order (empty: every element of every input; "
               "end -1: to the end). "
               "part_rings[i] >= 0 says X[i] is this rank's part of a buffer split evenly over "
               "that ring (a ZeRO shard): its segments are then in the buffer's coordinates, "
               "and only their overlap with the rank's part counts."));
  OpRegistry::Global().Register(
      OpSchema("grad_scale")
          .Input("SquaredNorm")
          .Input("LossScale", SlotSpec::kOptional)
          .Output("Scale")
          .Output("Norm", SlotSpec::kOptional)
          .Attr<float>("max_norm", 0.0f)
          .AttrRange("max_norm", 0, kFiniteMax)
          .SetInferShape(InferGradScale)
          .Doc("The factor parameter updates multiply their gradient by. With LossScale s "
               "(the gradients are s times the true ones) Norm = sqrt(SquaredNorm) / s, "
               "else sqrt(SquaredNorm). Scale = min(1, max_norm / (Norm + 1e-6)) / s: global-norm "
               "clipping (max_norm 0: none) and the loss scale undone in one factor. A "
               "SquaredNorm that is not finite (a gradient overflowed) makes Scale NaN, which "
               "the updates take as 'skip this step'."));
  OpRegistry::Global().Register(
      OpSchema("update_loss_scale")
          .Input("SquaredNorm")
          .Input("LossScale")
          .Input("GoodSteps")
          .Output("LossScaleOut")
          .Output("GoodStepsOut")
          .Attr<int64_t>("growth_interval", 2000)
          .AttrRange("growth_interval", 1, 1e15)
          .SetInferShape(InferUpdateLossScale)
          .Doc("Dynamic loss scaling (fp16): a SquaredNorm that is not finite (the step's "
               "gradients overflowed, and the updates skipped it) halves LossScale and zeroes "
               "GoodSteps; otherwise GoodSteps counts up, and at growth_interval LossScale "
               "doubles and the count restarts. The outputs are normally the inputs (in "
               "place): optimizer state, so checkpoints carry it."));
}

}  // namespace loom
