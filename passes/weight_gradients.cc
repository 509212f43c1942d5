#include "passes/weight_gradients.h"

#include <algorithm>
#include <vector>

namespace loom {

std::unordered_set<std::string> WeightGradients(const Block& block) {
  std::unordered_set<std::string> weight_grads;
  std::unordered_set<const Op*> reshapes_weight_grads;
  auto reads_only_gradients = [](const Op* op) {
    const std::vector<std::string> in = op->InputVars();
    return std::all_of(in.begin(), in.end(), IsGradVarName);
  };
  // Readers follow their producers, so one pass from the end decides.
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
  return weight_grads;
}

bool OnlyWeightGradients(const Op& op, const std::unordered_set<std::string>& weight_grads) {
  const std::vector<std::string> outputs = op.OutputVars();
  return !outputs.empty() && std::all_of(outputs.begin(), outputs.end(), [&](const std::string& v) {
    return weight_grads.count(v) > 0;
  });
}

}  // namespace loom
