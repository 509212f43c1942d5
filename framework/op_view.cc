#include "framework/op_view.h"

#include "framework/op_registry.h"

namespace loom {

std::optional<OpView> OpViewOf(const Op& op) {
  const OpSchema* schema = OpRegistry::Global().Find(op.type());
  if (schema == nullptr || schema->view_of().empty()) return std::nullopt;
  const std::vector<std::string> outputs = op.OutputVars();
  for (const std::string& out : outputs) {
    const proto::VarDesc* v = op.block() == nullptr ? nullptr : op.block()->FindVar(out);
    if (v == nullptr || v->persistable()) return std::nullopt;
  }
  OpView view{op.Input(schema->view_of()), {0}};
  if (schema->view_offsets()) view.offsets = schema->view_offsets()(op);
  if (view.offsets.size() != outputs.size()) return std::nullopt;
  return view;
}

}  // namespace loom
