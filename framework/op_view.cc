#include "framework/op_view.h"

#include <algorithm>

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

std::optional<OpJoin> OpJoinOf(const Op& op) {
  const OpSchema* schema = OpRegistry::Global().Find(op.type());
  const Block* block = op.block();
  if (schema == nullptr || schema->join_of().empty() || block == nullptr) return std::nullopt;
  OpJoin join;
  join.output = op.Output(schema->outputs().front().name);
  const proto::VarDesc* out = block->FindVar(join.output);
  if (out == nullptr || out->persistable()) return std::nullopt;
  join.parts.assign(op.Inputs(schema->join_of()).begin(), op.Inputs(schema->join_of()).end());
  join.offsets = schema->join_offsets()(op);
  if (join.offsets.size() != join.parts.size()) return std::nullopt;
  const int at = op.index();
  const std::string* stream = nullptr;
  std::vector<std::string> seen;
  for (const std::string& part : join.parts) {
    const proto::VarDesc* v = part.empty() ? nullptr : block->FindVar(part);
    if (v == nullptr || v->persistable() || part == join.output) return std::nullopt;
    if (std::find(seen.begin(), seen.end(), part) != seen.end()) return std::nullopt;
    seen.push_back(part);
    const std::vector<Op*>& writers = block->Producers(part);
    const std::vector<Op*>& readers = block->Consumers(part);
    if (writers.size() != 1 || readers.size() != 1 || readers[0] != &op) return std::nullopt;
    const Op& producer = *writers[0];
    if (producer.index() >= at || OpViewOf(producer)) return std::nullopt;
    const OpSchema* ps = OpRegistry::Global().Find(producer.type());
    if (ps == nullptr || !ps->join_of().empty()) return std::nullopt;
    if (stream != nullptr && producer.desc().stream() != *stream) return std::nullopt;
    stream = &producer.desc().stream();
  }
  return join;
}

std::optional<PlacedPart> PlacedPartOf(const Block& block, const std::string& var) {
  const std::vector<Op*>& readers = block.Consumers(var);
  if (readers.size() != 1) return std::nullopt;
  std::optional<OpJoin> join = OpJoinOf(*readers[0]);
  if (!join) return std::nullopt;
  for (size_t i = 0; i < join->parts.size(); ++i) {
    if (join->parts[i] == var) return PlacedPart{join->output, join->offsets[i]};
  }
  return std::nullopt;
}

}  // namespace loom
