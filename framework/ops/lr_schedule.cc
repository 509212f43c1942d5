// lr_schedule: the learning rate of this step from the step counter
// (framework/lr_schedule.h), and the counter advanced. Run once a step
// before the parameter updates, on every pipeline stage.
#include "framework/lr_schedule.h"

#include "framework/ops/op_helpers.h"

namespace loom {

StatusOr<LrDecay> ParseLrDecay(const std::string& name) {
  if (name == "constant") return kLrConstant;
  if (name == "linear") return kLrLinear;
  if (name == "cosine") return kLrCosine;
  return InvalidArgument("learning-rate decay '", name, "' is not one of constant, linear, cosine");
}

StatusOr<LrScheduleParams> LrScheduleParamsOf(const proto::OpDesc& op) {
  LrScheduleParams p;
  p.learning_rate = FindAttrOrDefault(op, "learning_rate")->f();
  p.min_learning_rate = FindAttrOrDefault(op, "min_learning_rate")->f();
  p.warmup_steps = FindAttrOrDefault(op, "warmup_steps")->l();
  p.decay_steps = FindAttrOrDefault(op, "decay_steps")->l();
  LOOM_ASSIGN_OR_RETURN(LrDecay decay, ParseLrDecay(FindAttrOrDefault(op, "decay")->s()));
  p.decay = decay;
  if (p.min_learning_rate > p.learning_rate) {
    return InvalidArgument("min_learning_rate ", p.min_learning_rate, " is above learning_rate ",
                           p.learning_rate);
  }
  if (p.decay != kLrConstant && p.decay_steps < p.warmup_steps) {
    return InvalidArgument("decay_steps ", p.decay_steps, " ends before warmup_steps ",
                           p.warmup_steps, " (decay_steps counts the warm-up too)");
  }
  return p;
}

namespace {

Status InferLrSchedule(InferShapeContext& ctx) {
  const TensorMeta& step = ctx.Input("Step");
  if (step.dtype != proto::INT64 || NumElements(step.shape) != 1) {
    return InvalidArgument("Step must be int64[1] but is ", MetaToString(step));
  }
  LOOM_RETURN_IF_ERROR(LrScheduleParamsOf(ctx.desc()).status());
  ctx.SetOutput("LearningRate", TensorMeta{proto::FP32, {1}});
  ctx.ShareMeta("Step", "StepOut");
  return Status::OK();
}

}  // namespace

void RegisterLrScheduleOps() {
  OpRegistry::Global().Register(
      OpSchema("lr_schedule")
          .Input("Step")
          .Output("LearningRate")
          .Output("StepOut")
          .RequiredAttr<float>("learning_rate")
          .Attr<float>("min_learning_rate", 0.0f)
          .Attr<int64_t>("warmup_steps", 0)
          .Attr<int64_t>("decay_steps", 0)
          .Attr<std::string>("decay", "constant")
          .AttrRange("learning_rate", 0, kFiniteMax)
          .AttrRange("min_learning_rate", 0, kFiniteMax)
          .AttrRange("warmup_steps", 0, 1e15)
          .AttrRange("decay_steps", 0, 1e15)
          .SetInferShape(InferLrSchedule)
          .Doc("LearningRate = the schedule's rate after Step completed steps (linear warm-up, "
               "then constant, linear or cosine decay to min_learning_rate); StepOut = Step + 1, "
               "normally Step itself."));
}

}  // namespace loom
