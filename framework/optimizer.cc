#include "framework/optimizer.h"

#include <cmath>

#include "framework/grad_clip.h"
#include "framework/op_builder.h"
#include "framework/shape_inference.h"

namespace loom {

Status AddOptimizerState(Program& main, Program& startup, const std::string& name,
                         const Shape& shape, float value, DataType dtype) {
  for (Program* p : {&main, &startup}) {
    proto::VarDesc* var = p->global_block().AddVar(name);
    SetMeta(TensorMeta{dtype, shape}, var);
    var->set_persistable(true);
  }
  return AppendOpInferShapes(startup.global_block(),
                             OpDescBuilder("fill_constant")
                                 .Output("Out", name)
                                 .Attr("shape", shape)
                                 .Attr("dtype", static_cast<int32_t>(dtype))
                                 .Attr("value", value))
      .status();
}

namespace {

// The op that sets each step's learning rate from the step counter; on
// every pipeline stage (role lr-schedule), before the updates.
Status AppendLrSchedule(Program& main, Program& startup, const OptimizerConfig& config) {
  LOOM_RETURN_IF_ERROR(AddOptimizerState(main, startup, kLrStepVar, {1}, 0.0f, proto::INT64));
  auto op = AppendOpInferShapes(main.global_block(),
                                OpDescBuilder("lr_schedule")
                                    .Input("Step", kLrStepVar)
                                    .Output("LearningRate", kLearningRateVar)
                                    .Output("StepOut", kLrStepVar)
                                    .Attr("learning_rate", config.learning_rate)
                                    .Attr("min_learning_rate", config.min_learning_rate)
                                    .Attr("warmup_steps", config.warmup_steps)
                                    .Attr("decay_steps", config.decay_steps)
                                    .Attr("decay", config.lr_decay)
                                    .Role(role::kOptimize | role::kLRSchedule));
  return op.status().WithContext("learning-rate schedule");
}

}  // namespace

Status AppendOptimizer(Program& main, Program& startup,
                       const std::vector<ParamGradPair>& pairs,
                       const OptimizerConfig& config) {
  if (config.type != "adamw" && config.type != "sgd") {
    return InvalidArgument("optimizer type '", config.type,
                           "' is not one of adamw, sgd");
  }
  if (!(config.clip_grad_norm >= 0 && std::isfinite(config.clip_grad_norm))) {
    return InvalidArgument("clip_grad_norm ", config.clip_grad_norm,
                           " is not a norm (>= 0; 0 does not clip)");
  }
  Block& block = main.global_block();
  LOOM_RETURN_IF_ERROR(AddOptimizerState(main, startup, kLearningRateVar, {1},
                                config.learning_rate));
  if (config.has_schedule()) LOOM_RETURN_IF_ERROR(AppendLrSchedule(main, startup, config));
  for (const ParamGradPair& pair : pairs) {
    const proto::VarDesc* param = block.FindVar(pair.param);
    if (param == nullptr || !param->is_parameter()) {
      return InvalidArgument("optimizer: '", pair.param,
                             "' is not a parameter");
    }
    const std::string where = StrCat("optimizer update of ", pair.param);
    const Shape shape(param->shape().begin(), param->shape().end());
    if (config.type == "sgd") {
      auto op = AppendOpInferShapes(block, OpDescBuilder("sgd")
                                               .Input("Param", pair.param)
                                               .Input("Grad", pair.grad)
                                               .Input("LearningRate", kLearningRateVar)
                                               .Output("ParamOut", pair.param)
                                               .Role(role::kOptimize));
      LOOM_RETURN_IF_ERROR(op.status().WithContext(where));
      continue;
    }
    const std::string m1 = pair.param + ".moment1";
    const std::string m2 = pair.param + ".moment2";
    const std::string b1 = pair.param + ".beta1_pow";
    const std::string b2 = pair.param + ".beta2_pow";
    LOOM_RETURN_IF_ERROR(AddOptimizerState(main, startup, m1, shape, 0.0f));
    LOOM_RETURN_IF_ERROR(AddOptimizerState(main, startup, m2, shape, 0.0f));
    LOOM_RETURN_IF_ERROR(AddOptimizerState(main, startup, b1, {1}, config.beta1));
    LOOM_RETURN_IF_ERROR(AddOptimizerState(main, startup, b2, {1}, config.beta2));
    const float decay = shape.size() >= 2 ? config.weight_decay : 0.0f;
    auto op = AppendOpInferShapes(block, OpDescBuilder("adamw")
                                             .Input("Param", pair.param)
                                             .Input("Grad", pair.grad)
                                             .Input("LearningRate", kLearningRateVar)
                                             .Input("Moment1", m1)
                                             .Input("Moment2", m2)
                                             .Input("Beta1Pow", b1)
                                             .Input("Beta2Pow", b2)
                                             .Output("ParamOut", pair.param)
                                             .Output("Moment1Out", m1)
                                             .Output("Moment2Out", m2)
                                             .Output("Beta1PowOut", b1)
                                             .Output("Beta2PowOut", b2)
                                             .Attr("beta1", config.beta1)
                                             .Attr("beta2", config.beta2)
                                             .Attr("epsilon", config.epsilon)
                                             .Attr("weight_decay", decay)
                                             .Role(role::kOptimize));
    LOOM_RETURN_IF_ERROR(op.status().WithContext(where));
  }
  if (config.clip_grad_norm > 0) {
    GradScaling clip;
    clip.max_norm = config.clip_grad_norm;
    return AddSerialGradClip(block, clip);
  }
  return Status::OK();
}

std::map<std::string, int> MpShardedVars(const Block& block) {
  std::map<std::string, int> sharded;
  for (const auto& [name, var] : block.vars()) {
    if (var.is_parameter() && var.mp_axis() >= 0) sharded[name] = var.mp_axis();
  }
  for (const Op* op : block.ops()) {
    if (!op->HasRole(role::kOptimize) || !op->HasInput("Param")) continue;
    auto it = sharded.find(op->Input("Param"));
    if (it == sharded.end()) continue;
    const int axis = it->second;
    for (const char* slot : {"Moment1", "Moment2"}) {
      if (op->HasInput(slot)) sharded[op->Input(slot)] = axis;
    }
  }
  return sharded;
}

std::set<std::string> OptimizerStateVars(const Block& block) {
  std::set<std::string> state;
  for (const Op* op : block.ops()) {
    if (!op->HasRole(role::kOptimize)) continue;
    for (const auto& slot : op->desc().inputs()) {
      if (slot.name() == "Param" || slot.vars_size() != 1) continue;
      if (op->Output(slot.name() + "Out") == slot.vars(0)) state.insert(slot.vars(0));
    }
  }
  return state;
}

}  // namespace loom
