// split-backward: separates each backward op into its input-gradient half
// (B, role input_grad) and its weight-gradient half (W, role weight_grad),
// as the zero-bubble schedules need: B unblocks the previous stage, W can
// wait to fill a bubble.
//
// An op that writes both kinds of gradient (matmul_grad with X@GRAD and
// Y@GRAD) becomes two copies, each with the other kind's outputs pruned;
// kernels skip pruned outputs, so no work is done twice.
#include <algorithm>
#include <unordered_set>

#include "framework/op_builder.h"
#include "passes/parallel_passes.h"

namespace loom {
namespace {

constexpr const char* kPassName = "split-backward";

class SplitBackwardPass : public Pass {
 public:
  StatusOr<bool> Run(PassContext& ctx) override;
};

StatusOr<bool> SplitBackwardPass::Run(PassContext& ctx) {
  Block& block = ctx.program().global_block();
  // A weight gradient is the gradient of a parameter, in any of its forms
  // (w@GRAD, w@GRAD@RENAME@1, w@GRAD@MP_PARTIAL, w@GRAD@ACCUM), or one
  // that only reshapes into weight gradients: its readers read nothing
  // but gradients and make only weight gradients. That is the gradient of
  // AMP's low-precision copy of a weight (cast back to fp32), or of a
  // transposed tied embedding. A GEMM that reads such a copy makes its
  // gradient, and that work is W's: left in B, it would leave W only the
  // cast, and a held-back W would keep the whole weight gradient rather
  // than the GEMM's inputs. Readers follow their producers, so one pass
  // from the end decides.
  std::unordered_set<std::string> weight_grads;
  std::unordered_set<const Op*> reshapes_weight_grads;
  auto reads_only_gradients = [](const Op* op) {
    const std::vector<std::string> in = op->InputVars();
    return std::all_of(in.begin(), in.end(), IsGradVarName);
  };
  const std::vector<Op*> ops = block.OpVector();
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    const Op* op = *it;
    if (!op->HasRole(role::kBackward)) continue;
    const std::vector<std::string> outputs = op->OutputVars();
    bool all = !outputs.empty();  // a send makes nothing, and is B's
    for (const std::string& out : outputs) {
      bool weight = false;
      if (IsGradVarName(out)) {
        const proto::VarDesc* fwd = block.FindVar(StripGradSuffix(out));
        const std::vector<Op*>& readers = block.Consumers(out);
        weight = (fwd != nullptr && fwd->is_parameter()) ||
                 (!readers.empty() && std::all_of(readers.begin(), readers.end(), [&](const Op* r) {
                   return reshapes_weight_grads.count(r) > 0;
                 }));
      }
      if (weight) weight_grads.insert(out);
      all &= weight;
    }
    if (all && reads_only_gradients(op)) reshapes_weight_grads.insert(op);
  }
  auto is_weight_grad = [&](const std::string& var) { return weight_grads.count(var) > 0; };
  int split = 0;
  for (Op* op : block.OpVector()) {
    if (!op->HasRole(role::kBackward)) continue;
    bool weights = false, inputs = false;
    for (const std::string& out : op->OutputVars()) {
      (is_weight_grad(out) ? weights : inputs) = true;
    }
    if (!(weights && inputs)) {
      op->set_role(op->role() | (weights ? role::kWeightGrad : role::kInputGrad));
      continue;
    }
    proto::OpDesc w = op->desc();
    w.set_id(0);  // a new op
    w.set_role(op->role() | role::kWeightGrad);
    for (auto& slot : *w.mutable_outputs()) {
      for (auto& v : *slot.mutable_vars()) {
        if (!is_weight_grad(v)) v.clear();
      }
    }
    // B keeps the input gradients; the pairs move to W with the weights.
    for (const auto& slot : op->desc().outputs()) {
      std::vector<std::string> kept;
      for (const auto& v : slot.vars()) kept.push_back(is_weight_grad(v) ? "" : v);
      block.SetOutputs(op, slot.name(), kept);
    }
    op->annotations().clear_param_grads();
    op->set_role(op->role() | role::kInputGrad);
    block.InsertOpAfter(op, std::move(w));
    ++split;
  }
  ctx.Explain(kPassName, StrCat(split, " backward ops split into B and W halves"));
  return true;
}

}  // namespace

PassInfo SplitBackwardPassInfo() {
  return PassInfoOf<SplitBackwardPass>(
      kPassName, "splits backward ops into input-grad (B) and weight-grad (W) halves");
}

}  // namespace loom
