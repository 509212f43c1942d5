#include "passes/amp.h"

#include <cmath>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "framework/autodiff.h"
#include "framework/grad_clip.h"
#include "framework/low_precision.h"
#include "framework/op_builder.h"
#include "framework/op_registry.h"
#include "framework/shape_inference.h"

namespace loom {

proto::OpDesc CastOp(const std::string& from, const std::string& to, DataType from_dtype,
                     DataType to_dtype) {
  return OpDescBuilder("cast")
      .Input("X", from)
      .Output("Out", to)
      .Attr("in_dtype", static_cast<int32_t>(from_dtype))
      .Attr("out_dtype", static_cast<int32_t>(to_dtype))
      .Build();
}

namespace {

// Ops that compute in the low dtype at O1: the GEMMs, where the time is.
bool OnWhiteList(const std::string& type) { return type == "matmul"; }

// Ops that compute in fp32 at every level: the loss, whose exponentials and
// long sums lose too much in 8 mantissa bits.
bool OnBlackList(const std::string& type) {
  return type == "softmax_with_cross_entropy" || type == "c_softmax_with_cross_entropy" ||
         type == "reduce_mean" || type == "reduce_sum";
}

// Inputs that stay fp32 whatever their op computes in: layer norm's affine
// parameters (its kernel takes them in fp32 beside a low-precision X).
bool KeepsFp32(const std::string& op_type, const std::string& slot) {
  return op_type == "layer_norm" && (slot == "Scale" || slot == "Bias");
}

class AmpRewriter {
 public:
  AmpRewriter(Program& program, const AmpConfig& config)
      : program_(program), block_(program.global_block()), config_(config) {}
  Status Run();

 private:
  // Takes the backward and everything after it out of the block; keeps the
  // ops that are not backward (optimizer, learning rate) to put back.
  Status TakeOffBackward();
  Status RewriteForwardOp(Op* op);
  // The var holding `var` in `to`: a cast inserted before `reader`. An
  // activation's cast is shared by its later readers; a parameter gets a
  // cast per reader, so that each lands in its reader's pipeline stage (a
  // tied embedding is read by the first stage and the last).
  StatusOr<std::string> CastFor(Op* reader, const std::string& var, DataType to);
  std::string UniqueName(const std::string& base) const;
  Status RestoreBackward(const std::string& loss);

  Program& program_;
  Block& block_;
  const AmpConfig config_;
  bool had_backward_ = false;
  std::vector<proto::OpDesc> kept_;  // after the backward, in order
  std::map<std::pair<std::string, DataType>, std::string> casts_;
};

Status AmpRewriter::Run() {
  LOOM_RETURN_IF_ERROR(TakeOffBackward());
  std::string loss;
  for (Op* op : block_.OpVector()) {
    if (!op->HasRole(role::kForward)) continue;
    if (op->HasRole(role::kLoss)) loss = op->OutputVars().front();
    Status s = RewriteForwardOp(op);
    if (!s.ok()) return s.WithContext(op->Location());
  }
  if (!had_backward_) return Status::OK();
  if (loss.empty()) {
    return InvalidArgument("the program has a backward but no forward op has the loss role");
  }
  return RestoreBackward(loss);
}

Status AmpRewriter::TakeOffBackward() {
  std::vector<Op*> ops = block_.OpVector();
  size_t first = ops.size();
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i]->HasRole(role::kBackward)) {
      first = i;
      break;
    }
  }
  had_backward_ = first < ops.size();
  std::set<std::string> touched;
  for (size_t i = first; i < ops.size(); ++i) {
    Op* op = ops[i];
    if (op->HasRole(role::kForward)) {
      return InvalidArgument(op->Location(), ": a forward op after the backward began (op ",
                             ops[first]->index(), "); AMP rewrites programs whose forward "
                             "comes first");
    }
    if (!op->HasRole(role::kBackward)) kept_.push_back(op->desc());
    for (const std::string& v : op->InputVars()) touched.insert(v);
    for (const std::string& v : op->OutputVars()) touched.insert(v);
    block_.EraseOp(op);
  }
  // Gradients and other backward temporaries go with their ops; the
  // backward made again declares its own.
  for (const std::string& v : touched) {
    const proto::VarDesc* var = block_.FindVar(v);
    if (var == nullptr || var->persistable() || var->is_data()) continue;
    if (block_.Producers(v).empty() && block_.Consumers(v).empty()) block_.RemoveVar(v);
  }
  return Status::OK();
}

Status AmpRewriter::RewriteForwardOp(Op* op) {
  // The float inputs the op's precision applies to, each var once.
  std::vector<std::pair<std::string, bool>> inputs;  // var, keeps fp32
  std::set<std::string> seen;
  bool any_low = false;
  for (const auto& slot : op->desc().inputs()) {
    for (const std::string& v : slot.vars()) {
      if (v.empty() || !seen.insert(v).second) continue;
      const proto::VarDesc* var = block_.FindVar(v);
      if (var == nullptr || !IsComputeFloat(var->dtype())) continue;
      inputs.emplace_back(v, KeepsFp32(op->type(), slot.name()));
      any_low |= var->dtype() == config_.dtype;
    }
  }
  if (inputs.empty()) return Status::OK();
  for (const std::string& v : op->OutputVars()) {
    // An op that writes state across steps keeps its precision.
    if (block_.FindVar(v)->persistable()) return Status::OK();
  }
  bool low;
  if (OnBlackList(op->type()) || op->HasRole(role::kLoss)) {
    low = false;
  } else if (config_.level >= 2 || OnWhiteList(op->type())) {
    low = true;
  } else {
    low = any_low;  // O1's gray ops follow their inputs
  }
  for (const auto& [v, keeps_fp32] : inputs) {
    const DataType want = low && !keeps_fp32 ? config_.dtype : proto::FP32;
    if (block_.FindVar(v)->dtype() == want) continue;
    LOOM_ASSIGN_OR_RETURN(std::string cast, CastFor(op, v, want));
    block_.RenameInput(op, v, cast);
  }
  // The outputs take the dtypes the op now computes in.
  LOOM_ASSIGN_OR_RETURN(auto metas, InferOpShapes(op->desc(), block_));
  for (const auto& [name, meta] : metas) SetMeta(meta, block_.FindVar(name));
  return Status::OK();
}

StatusOr<std::string> AmpRewriter::CastFor(Op* reader, const std::string& var, DataType to) {
  const proto::VarDesc* desc = block_.FindVar(var);
  const bool shared = !desc->persistable();
  if (shared) {
    auto it = casts_.find({var, to});
    if (it != casts_.end()) return it->second;
  }
  const std::string name = UniqueName(var + ".cast_" + DataTypeName(to));
  proto::OpDesc cast = CastOp(var, name, desc->dtype(), to);
  cast.set_role(role::kForward);
  // The reader's layer: a recomputed layer makes its low-precision weights
  // again too, rather than keeping them from forward to backward.
  cast.set_layer(reader->desc().layer());
  LOOM_RETURN_IF_ERROR(InsertOpInferShapes(block_, reader, std::move(cast)).status());
  if (shared) casts_[{var, to}] = name;
  return name;
}

std::string AmpRewriter::UniqueName(const std::string& base) const {
  std::string name = base;
  for (int i = 1; block_.HasVar(name); ++i) name = base + "." + std::to_string(i);
  return name;
}

Status AmpRewriter::RestoreBackward(const std::string& loss) {
  LOOM_ASSIGN_OR_RETURN(std::vector<ParamGradPair> pairs, AppendBackward(program_, loss));
  // Ops of no parameter (the learning rate's) first, as they were; then the
  // updates, in the order the new gradients complete.
  std::map<std::string, std::vector<proto::OpDesc*>> updates;  // by parameter
  std::vector<proto::OpDesc*> order;
  for (proto::OpDesc& desc : kept_) {
    const std::vector<std::string> params = SlotVars(desc.inputs(), "Param");
    if (params.empty()) {
      order.push_back(&desc);
    } else {
      updates[params.front()].push_back(&desc);
    }
  }
  for (const ParamGradPair& pair : pairs) {
    auto it = updates.find(pair.param);
    if (it == updates.end()) continue;
    order.insert(order.end(), it->second.begin(), it->second.end());
    updates.erase(it);
  }
  if (!updates.empty()) {
    return FailedPrecondition("parameter '", updates.begin()->first, "' has an update but no "
                              "gradient in the mixed-precision backward");
  }
  for (proto::OpDesc* desc : order) {
    auto op = AppendOpInferShapes(block_, std::move(*desc));
    if (!op.ok()) return op.status().WithContext("restoring the optimizer");
  }
  return Status::OK();
}

// The fill_constant that seeds the loss gradient, or null without a backward.
Op* FindLossSeed(const Block& block) {
  for (Op* op : block.ops()) {
    if (op->type() == "fill_constant" && op->HasRole(role::kBackward) &&
        op->HasRole(role::kLoss)) {
      return op;
    }
  }
  return nullptr;
}

// The loss gradient's seed times the loss scale: every gradient of the
// backward is then the scale times the true one, so that small fp16
// gradients do not flush to zero.
Status AddLossScaling(Program& main, Program& startup, const AmpConfig& config) {
  Block& block = main.global_block();
  Op* seed = FindLossSeed(block);
  const std::string grad = seed->Output("Out");
  const TensorMeta meta = MetaOf(*block.FindVar(grad));
  if (meta.dtype != proto::FP32 || NumElements(meta.shape) != 1) {
    return InvalidArgument("loss scaling: the loss gradient ", grad, " is ",
                           MetaToString(meta), ", not one fp32 value");
  }
  // A scalar, which broadcasts to the loss's shape ([] or [1]).
  LOOM_RETURN_IF_ERROR(DeclareLossScaleState(main, startup, config.init_loss_scale));
  const std::string unscaled = grad + "@UNSCALED";
  proto::VarDesc* var = block.AddVar(unscaled);
  *var = *block.FindVar(grad);
  var->set_name(unscaled);
  block.RenameOutput(seed, grad, unscaled);
  proto::OpDesc scale = OpDescBuilder("elementwise_mul")
                            .Input("X", unscaled)
                            .Input("Y", kLossScaleVar)
                            .Output("Out", grad)
                            .Role(role::kBackward | role::kLoss);
  scale.set_forward_id(seed->desc().forward_id());
  return InsertOpAfterInferShapes(block, seed, std::move(scale)).status();
}

}  // namespace

StatusOr<int> ParseAmpLevel(const std::string& text) {
  if (text == "O0") return 0;
  if (text == "O1") return 1;
  if (text == "O2") return 2;
  return InvalidArgument("AMP level '", text, "' is not one of O0, O1, O2");
}

StatusOr<DataType> ParseAmpDtype(const std::string& text) {
  if (text == "bf16") return proto::BF16;
  if (text == "fp16") return proto::FP16;
  return InvalidArgument("AMP dtype '", text, "' is not one of bf16, fp16");
}

StatusOr<AmpConfig> AmpConfigOf(const proto::Strategy& strategy) {
  AmpConfig config;
  auto level = ParseAmpLevel(strategy.amp().level());
  if (!level.ok()) return level.status().WithContext("amp.level");
  auto dtype = ParseAmpDtype(strategy.amp().dtype());
  if (!dtype.ok()) return dtype.status().WithContext("amp.dtype");
  config.level = *level;
  config.dtype = *dtype;
  config.init_loss_scale = strategy.amp().init_loss_scale();
  config.growth_interval = strategy.amp().loss_scale_growth_interval();
  if (!(config.init_loss_scale >= 1) || !std::isfinite(config.init_loss_scale)) {
    return InvalidArgument("amp.init_loss_scale: ", config.init_loss_scale,
                           " is not a finite number >= 1");
  }
  if (config.growth_interval < 1) {
    return InvalidArgument("amp.loss_scale_growth_interval: ", config.growth_interval,
                           " is not a step count >= 1");
  }
  const std::string& reduce = strategy.amp().grad_reduce_dtype();
  if (reduce == DataTypeName(config.dtype) && config.level > 0) {
    config.grad_reduce_dtype = config.dtype;
  } else if (reduce != "fp32") {
    return InvalidArgument(
        "amp.grad_reduce_dtype: '", reduce, "' is not fp32",
        config.level > 0 ? StrCat(" or the compute dtype ", DataTypeName(config.dtype))
                         : std::string(" (amp.level is O0: gradients are fp32)"));
  }
  return config;
}

Status ApplyAmp(Program& program, const AmpConfig& config, Program* startup) {
  if (config.level == 0) return Status::OK();
  if (config.level < 0 || config.level > 2) {
    return InvalidArgument("AMP level ", config.level, " is not 0, 1 or 2");
  }
  if (!IsLowPrecision(config.dtype)) {
    return InvalidArgument("AMP dtype ", DataTypeName(config.dtype), " is not bf16 or fp16");
  }
  if (!(config.init_loss_scale >= 1) || !std::isfinite(config.init_loss_scale)) {
    return InvalidArgument("the initial loss scale ", config.init_loss_scale,
                           " is not a finite number >= 1");
  }
  if (config.growth_interval < 1) {
    return InvalidArgument("the loss scale's growth interval ", config.growth_interval,
                           " is not a step count >= 1");
  }
  RegisterAllOps();
  // The clip section reads the gradients the backward made again: it is
  // made again after them.
  LOOM_ASSIGN_OR_RETURN(GradScaling scaling, TakeGradClip(program));
  AmpRewriter rewriter(program, config);
  LOOM_RETURN_IF_ERROR(rewriter.Run());
  const bool has_backward = FindLossSeed(program.global_block()) != nullptr;
  if (config.dtype == proto::FP16 && has_backward) {
    if (startup == nullptr) {
      return InvalidArgument("fp16 training scales its loss, whose state the startup program "
                             "must initialize, but none was given");
    }
    LOOM_RETURN_IF_ERROR(AddLossScaling(program, *startup, config));
    scaling.loss_scaling = true;
    scaling.growth_interval = config.growth_interval;
  }
  if (!scaling.any()) return Status::OK();
  return AddSerialGradClip(program.global_block(), scaling);
}

}  // namespace loom
