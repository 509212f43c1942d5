// split-backward: separates each backward op into its input-gradient half
// (B, role input_grad) and its weight-gradient half (W, role weight_grad),
// as the zero-bubble schedules need: B unblocks the previous stage, W can
// wait to fill a bubble.
//
// W holds the weight gradients' GEMMs, as the paper's W does: a
// matmul_grad that writes both kinds of gradient (X@GRAD and Y@GRAD)
// becomes two copies, each with the other kind's outputs pruned; kernels
// skip pruned outputs, so no work is done twice. A weight gradient that is
// a reduction (a bias's, a layer norm's, an embedding's scatter) stays in B
// with its op: deferring it would save W little time, and would keep its
// inputs, a whole activation and its gradient, from B to W for every
// micro-batch waiting for its W. What reads a W output (the casts and sums
// of a GEMM's weight gradient) follows it into W.
#include <algorithm>
#include <unordered_set>

#include "framework/op_builder.h"
#include "passes/parallel_passes.h"
#include "passes/weight_gradients.h"

namespace loom {
namespace {

constexpr const char* kPassName = "split-backward";

class SplitBackwardPass : public Pass {
 public:
  StatusOr<bool> Run(PassContext& ctx) override;
};

StatusOr<bool> SplitBackwardPass::Run(PassContext& ctx) {
  Block& block = ctx.program().global_block();
  // A GEMM that reads AMP's low-precision copy of a weight makes a weight
  // gradient (weight_gradients.h), and that work is W's: left in B, it
  // would leave W only the cast, and a held-back W would keep the whole
  // weight gradient rather than the GEMM's inputs.
  const std::unordered_set<std::string> weight_grads = WeightGradients(block);
  auto is_weight_grad = [&](const std::string& var) { return weight_grads.count(var) > 0; };
  std::unordered_set<std::string> made_in_w;
  auto reads_w = [&](const Op* op) {
    for (const std::string& in : op->InputVars()) {
      if (made_in_w.count(in) > 0) return true;
    }
    return false;
  };
  auto to_w = [&](Op* op) {
    op->set_role(op->role() | role::kWeightGrad);
    for (const std::string& out : op->OutputVars()) made_in_w.insert(out);
  };
  int split = 0;
  for (Op* op : block.OpVector()) {
    if (!op->HasRole(role::kBackward)) continue;
    bool weights = false, inputs = false;
    for (const std::string& out : op->OutputVars()) {
      (is_weight_grad(out) ? weights : inputs) = true;
    }
    const bool gemm = op->type() == "matmul_grad";
    if (!(weights && inputs && gemm)) {
      if ((weights && !inputs && gemm) || reads_w(op)) {
        to_w(op);
      } else {
        op->set_role(op->role() | role::kInputGrad);
      }
      continue;
    }
    proto::OpDesc w = op->desc();
    w.set_id(0);  // a new op
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
    to_w(block.InsertOpAfter(op, std::move(w)));
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
