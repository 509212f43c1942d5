#include "framework/autodiff.h"

#include <unordered_map>
#include <unordered_set>

#include "framework/op_builder.h"
#include "framework/op_registry.h"
#include "framework/shape_inference.h"

namespace loom {
namespace {

constexpr const char* kRenameInfix = "@RENAME@";

class BackwardBuilder {
 public:
  BackwardBuilder(Block& block, std::string loss)
      : block_(block), loss_(std::move(loss)) {}

  StatusOr<std::vector<ParamGradPair>> Run();

 private:
  // Which forward vars need a gradient, and which ops get differentiated.
  Status Analyze(const std::vector<Op*>& forward);
  bool NeedsGrad(const std::string& var) const {
    return needs_grad_.count(var) > 0;
  }
  // Makes `var`'s gradient final: renames a lone contribution to
  // var@GRAD, or sums several into it.
  Status Finalize(const std::string& var);
  // Zeros for the gradient of a forward output no one differentiated.
  Status FillZeroGrad(const std::string& var);
  Status EmitGradOps(const Op& forward);
  // The forward op a gradient var belongs to: the var's producer, or for a
  // parameter (no producer) its first reader.
  int64_t OwnerOf(const std::string& var) const {
    Op* op = block_.FirstProducer(var);
    if (op == nullptr || !op->HasRole(role::kForward)) {
      op = nullptr;
      for (Op* c : block_.Consumers(var)) {
        if (c->HasRole(role::kForward) && (op == nullptr || c->index() < op->index())) {
          op = c;
        }
      }
    }
    return op == nullptr ? 0 : op->id();
  }
  StatusOr<Op*> Emit(proto::OpDesc desc, int64_t forward_id) {
    desc.set_forward_id(forward_id);
    uint32_t r = role::kBackward;
    const OpSchema* schema = OpRegistry::Global().Find(desc.type());
    if (schema != nullptr && schema->communication()) r |= role::kComm;
    desc.set_role(r);
    return AppendOpInferShapes(block_, std::move(desc));
  }

  Block& block_;
  std::string loss_;
  std::unordered_set<std::string> needs_grad_;
  std::unordered_set<std::string> reaches_loss_;
  // Contributions expected / received for each var's gradient.
  std::unordered_map<std::string, int> expected_;
  std::unordered_map<std::string, std::vector<std::string>> received_;
  std::unordered_set<std::string> finalized_;
  std::vector<ParamGradPair> pairs_;
};

Status BackwardBuilder::Analyze(const std::vector<Op*>& forward) {
  const OpRegistry& registry = OpRegistry::Global();
  for (const auto& [name, var] : block_.vars()) {
    if (var.is_parameter() && !var.stop_gradient() && IsFloating(var.dtype())) {
      needs_grad_.insert(name);
    }
  }
  // Forward sweep: a float output of an op with a differentiable input that
  // needs a gradient needs one too.
  for (Op* op : forward) {
    const OpSchema* schema = registry.Find(op->type());
    if (schema == nullptr) {
      return NotFound(op->Location(), ": unknown op type");
    }
    bool any = false;
    for (const auto& slot : op->desc().inputs()) {
      const SlotSpec* spec = schema->FindInput(slot.name());
      if (spec == nullptr || spec->no_grad()) continue;
      for (const auto& v : slot.vars()) any |= NeedsGrad(v);
    }
    if (!any) continue;
    // Outputs in kNoGrad slots (layer_norm's Mean, say) are side results the
    // grad op never differentiates through: they act as constants.
    for (const auto& slot : op->desc().outputs()) {
      const SlotSpec* spec = schema->FindOutput(slot.name());
      if (spec == nullptr || spec->no_grad()) continue;
      for (const auto& out : slot.vars()) {
        const proto::VarDesc* var = block_.FindVar(out);
        if (var != nullptr && IsFloating(var->dtype()) &&
            !var->stop_gradient()) {
          needs_grad_.insert(out);
        }
      }
    }
  }
  // Reverse sweep: what the loss depends on.
  reaches_loss_.insert(loss_);
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    Op* op = *it;
    bool relevant = false;
    for (const std::string& out : op->OutputVars()) {
      relevant |= reaches_loss_.count(out) > 0;
    }
    if (!relevant) continue;
    for (const std::string& in : op->InputVars()) reaches_loss_.insert(in);
  }
  return Status::OK();
}

Status BackwardBuilder::Finalize(const std::string& var) {
  if (finalized_.count(var)) return Status::OK();
  finalized_.insert(var);
  auto it = received_.find(var);
  if (it == received_.end() || it->second.empty()) return Status::OK();
  const std::vector<std::string>& parts = it->second;
  const std::string grad = GradVarName(var);
  Op* producer = nullptr;
  if (parts.size() == 1) {
    LOOM_RETURN_IF_ERROR(block_.RenameVar(parts[0], grad));
    producer = block_.Producers(grad).front();
  } else {
    LOOM_ASSIGN_OR_RETURN(
        producer, Emit(OpDescBuilder("sum").Input("X", parts).Output("Out", grad),
                       OwnerOf(var)));
  }
  const proto::VarDesc* desc = block_.FindVar(var);
  if (desc != nullptr && desc->is_parameter()) {
    proto::ParamGrad* pg = producer->annotations().add_param_grads();
    pg->set_param(var);
    pg->set_grad(grad);
    pairs_.push_back({var, grad});
  }
  return Status::OK();
}

Status BackwardBuilder::FillZeroGrad(const std::string& var) {
  const proto::VarDesc* desc = block_.FindVar(var);
  if (desc == nullptr) return NotFound("var ", var, " is not declared");
  finalized_.insert(var);
  return Emit(OpDescBuilder("fill_constant")
                  .Output("Out", GradVarName(var))
                  .Attr("shape", std::vector<int64_t>(desc->shape().begin(),
                                                      desc->shape().end()))
                  .Attr("dtype", static_cast<int32_t>(desc->dtype()))
                  .Attr("value", 0.0f),
              OwnerOf(var))
      .status();
}

Status BackwardBuilder::EmitGradOps(const Op& forward) {
  const OpSchema* schema = OpRegistry::Global().Find(forward.type());
  if (!schema->differentiable()) {
    for (const std::string& in : forward.InputVars()) {
      if (NeedsGrad(in)) {
        return InvalidArgument(forward.Location(),
                               ": op is not differentiable, but its input '",
                               in, "' needs a gradient");
      }
    }
    return Status::OK();
  }
  for (proto::OpDesc grad : schema->grad_maker()(forward.desc())) {
    // Every gradient this op reads must be final before it runs.
    for (const auto& slot : grad.inputs()) {
      for (const auto& v : slot.vars()) {
        if (!IsGradVarName(v)) continue;
        std::string fwd_var = StripGradSuffix(v);
        if (finalized_.count(fwd_var)) continue;
        if (received_.count(fwd_var)) {
          LOOM_RETURN_IF_ERROR(Finalize(fwd_var));
        } else {
          LOOM_RETURN_IF_ERROR(FillZeroGrad(fwd_var));
        }
      }
    }
    // Prune gradients no one needs; give each contribution its own name.
    bool writes_any = false;
    std::vector<std::string> completed;
    // Outputs are recognized as gradients by name ("x@GRAD"), not by slot,
    // so that a grad maker may reuse a forward op (scale computes the
    // gradient of scale and of sum).
    for (auto& slot : *grad.mutable_outputs()) {
      for (auto& v : *slot.mutable_vars()) {
        if (v.empty()) continue;
        if (!IsGradVarName(v)) {
          writes_any = true;
          continue;
        }
        std::string fwd_var = StripGradSuffix(v);
        if (!NeedsGrad(fwd_var)) {
          v.clear();
          continue;
        }
        if (finalized_.count(fwd_var)) {
          return Internal("gradient of ", forward.Location(), " adds to ",
                          GradVarName(fwd_var), " after it was completed");
        }
        auto& parts = received_[fwd_var];
        v = StrCat(GradVarName(fwd_var), kRenameInfix, parts.size());
        parts.push_back(v);
        writes_any = true;
        if (static_cast<int>(parts.size()) == expected_[fwd_var]) {
          completed.push_back(fwd_var);
        }
      }
    }
    if (!writes_any) continue;
    auto op = Emit(std::move(grad), forward.id());
    if (!op.ok()) {
      return op.status().WithContext(
          StrCat("gradient of ", forward.Location()));
    }
    for (const std::string& var : completed) {
      LOOM_RETURN_IF_ERROR(Finalize(var));
    }
  }
  return Status::OK();
}

StatusOr<std::vector<ParamGradPair>> BackwardBuilder::Run() {
  const proto::VarDesc* loss = block_.FindVar(loss_);
  if (loss == nullptr) return NotFound("loss var '", loss_, "' is not declared");
  if (!IsFloating(loss->dtype()) ||
      NumElements(Shape(loss->shape().begin(), loss->shape().end())) != 1) {
    return InvalidArgument("loss var '", loss_, "' must be a floating scalar, "
                           "but is ", MetaToString(MetaOf(*loss)));
  }
  if (block_.HasVar(GradVarName(loss_))) {
    return AlreadyExists("the program already has a backward pass (",
                         GradVarName(loss_), " exists)");
  }
  Op* loss_op = block_.FirstProducer(loss_);
  if (loss_op == nullptr) return NotFound("no op produces loss '", loss_, "'");
  std::vector<Op*> forward;
  for (Op* op : block_.ops()) {
    forward.push_back(op);
    if (op == loss_op) break;
  }
  loss_op->set_role(loss_op->role() | role::kLoss);
  LOOM_RETURN_IF_ERROR(Analyze(forward));

  // Ops to differentiate, and how many contributions each var's gradient
  // gets from them.
  std::vector<Op*> to_diff;
  for (Op* op : forward) {
    bool relevant = false;
    for (const std::string& out : op->OutputVars()) {
      relevant |= reaches_loss_.count(out) > 0 && NeedsGrad(out);
    }
    if (!relevant) continue;
    to_diff.push_back(op);
    const OpSchema* schema = OpRegistry::Global().Find(op->type());
    for (const auto& slot : op->desc().inputs()) {
      const SlotSpec* spec = schema->FindInput(slot.name());
      if (spec == nullptr || spec->no_grad()) continue;
      for (const auto& v : slot.vars()) {
        if (NeedsGrad(v)) ++expected_[v];
      }
    }
  }

  LOOM_RETURN_IF_ERROR(
      Emit(OpDescBuilder("fill_constant")
               .Output("Out", GradVarName(loss_))
               .Attr("shape", std::vector<int64_t>(loss->shape().begin(),
                                                   loss->shape().end()))
               .Attr("dtype", static_cast<int32_t>(loss->dtype()))
               .Attr("value", 1.0f),
           loss_op->id())
          .status());
  block_.back()->set_role(role::kBackward | role::kLoss);
  finalized_.insert(loss_);

  for (auto it = to_diff.rbegin(); it != to_diff.rend(); ++it) {
    LOOM_RETURN_IF_ERROR(EmitGradOps(**it));
  }
  // Whatever is still pending (a contribution count the grad makers did not
  // meet) is completed at the end, in name order for determinism.
  std::vector<std::string> pending;
  for (const auto& [var, parts] : received_) {
    if (!finalized_.count(var)) pending.push_back(var);
  }
  std::sort(pending.begin(), pending.end());
  for (const std::string& var : pending) LOOM_RETURN_IF_ERROR(Finalize(var));
  return pairs_;
}

}  // namespace

StatusOr<std::vector<ParamGradPair>> AppendBackward(Program& program,
                                                    const std::string& loss) {
  RegisterAllOps();
  BackwardBuilder builder(program.global_block(), loss);
  return builder.Run();
}

}  // namespace loom
