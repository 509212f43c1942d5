#include "framework/verifier.h"

#include <algorithm>
#include <deque>
#include <unordered_map>
#include <unordered_set>

#include "framework/shape_inference.h"

namespace loom {
namespace {

// Searches the data-flow graph forward from `from`'s outputs for `to`; on
// success returns the path as "op 3 (add) -> 'y' -> op 5 (mul)". Runs only
// when an error has already been found, and is O(ops + uses).
std::string FindDataPath(const Block& block, Op* from, Op* to) {
  std::unordered_map<Op*, std::pair<Op*, std::string>> parent;
  std::deque<Op*> queue{from};
  parent[from] = {nullptr, ""};
  while (!queue.empty()) {
    Op* op = queue.front();
    queue.pop_front();
    if (op == to) break;
    for (const std::string& out : op->OutputVars()) {
      for (Op* next : block.Consumers(out)) {
        if (parent.count(next)) continue;
        parent[next] = {op, out};
        queue.push_back(next);
      }
    }
  }
  if (!parent.count(to)) return "";
  std::vector<std::string> parts;
  for (Op* op = to; op != nullptr; op = parent[op].first) {
    parts.push_back(op->Location());
    if (parent[op].first != nullptr) {
      parts.push_back(StrCat("'", parent[op].second, "'"));
    }
  }
  std::string path;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    if (!path.empty()) path += " -> ";
    path += *it;
  }
  return path;
}

Status CheckReadsDefined(const Block& block, Op* op,
                         const std::unordered_set<std::string>& defined) {
  for (const auto& slot : op->desc().inputs()) {
    for (const auto& v : slot.vars()) {
      if (v.empty()) continue;
      const proto::VarDesc* var = block.FindVar(v);
      if (var == nullptr) {
        return NotFound("input ", slot.name(), " reads undeclared var '", v,
                        "'");
      }
      if (var->is_data() || var->persistable() || var->job_input() ||
          defined.count(v)) {
        continue;
      }
      Op* writer = block.FirstProducer(v);
      if (writer == nullptr) {
        return FailedPrecondition("input ", slot.name(), " reads var '", v,
                                  "', which no op writes and which is "
                                  "neither data nor persistable");
      }
      std::string cycle = FindDataPath(block, op, writer);
      if (!cycle.empty()) {
        return FailedPrecondition("cycle: input ", slot.name(), " reads '", v,
                                  "', written by ", writer->Location(),
                                  ", which depends on this op: ", cycle);
      }
      return FailedPrecondition("input ", slot.name(), " reads var '", v,
                                "' before its first writer, ",
                                writer->Location());
    }
  }
  return Status::OK();
}

// Every var placed in a flat buffer (VarDesc.flat) fits inside it, and no
// two members of a buffer overlap. O(vars log vars).
Status CheckFlatSlots(const Block& block) {
  std::unordered_map<std::string, std::vector<std::pair<int64_t, std::string>>> members;
  for (const auto& [name, var] : block.vars()) {
    if (!var.has_flat()) continue;
    const std::string where = StrCat("var '", name, "' in flat buffer '", var.flat().buffer(), "'");
    const proto::VarDesc* buffer = block.FindVar(var.flat().buffer());
    if (buffer == nullptr) return NotFound(where, ": the buffer is not declared");
    // A persistable buffer holds persistable members. A temporary one (a
    // ZeRO-3 bucket that gathers make each time) holds temporaries, the
    // views a flat_split hands out, and its shard, the rank's part, which
    // persists on its own.
    const bool shard = var.flat().shard_ring() >= 0;
    if (buffer->persistable() ? !var.persistable() : var.persistable() && !shard) {
      return InvalidArgument(where, ": ", buffer->persistable() ? "a persistable" : "a temporary",
                             " buffer's members must be ",
                             buffer->persistable() ? "persistable" : "temporaries");
    }
    if (buffer->has_flat()) return InvalidArgument(where, ": the buffer is itself in a buffer");
    if (buffer->shape_size() != 1 || buffer->dtype() != var.dtype()) {
      return InvalidArgument(where, ": the buffer must be 1-D and of the member's dtype (",
                             MetaToString(MetaOf(*buffer)), " holding ",
                             MetaToString(MetaOf(var)), ")");
    }
    const int64_t numel = NumElements(MetaOf(var).shape);
    if (var.flat().shard_ring() >= 0) {
      // A shard aliases the members; it tiles the buffer instead.
      if (var.flat().offset() != 0 || numel == 0 || buffer->shape(0) % numel != 0) {
        return InvalidArgument(where, ": a shard (", numel, " elements at offset ",
                               var.flat().offset(), ") must tile the buffer's ",
                               buffer->shape(0), " from offset 0");
      }
      continue;
    }
    if (var.flat().offset() < 0 || var.flat().offset() + numel > buffer->shape(0)) {
      return InvalidArgument(where, ": elements [", var.flat().offset(), ", ",
                             var.flat().offset() + numel, ") lie outside its ", buffer->shape(0));
    }
    members[var.flat().buffer()].emplace_back(var.flat().offset(), name);
  }
  for (auto& [buffer, list] : members) {
    std::sort(list.begin(), list.end());
    for (size_t i = 1; i < list.size(); ++i) {
      const proto::VarDesc& prev = *block.FindVar(list[i - 1].second);
      if (list[i - 1].first + NumElements(MetaOf(prev).shape) > list[i].first) {
        return InvalidArgument("vars '", list[i - 1].second, "' and '", list[i].second,
                               "' overlap in flat buffer '", buffer, "'");
      }
    }
  }
  return Status::OK();
}

}  // namespace

Status VerifyBlock(const Block& block) {
  RegisterAllOps();
  LOOM_RETURN_IF_ERROR(CheckFlatSlots(block).WithContext(StrCat("block ", block.idx())));
  std::unordered_set<std::string> defined;
  defined.reserve(block.vars().size());
  for (Op* op : block.ops()) {
    auto located = [&](const Status& s) {
      return s.WithContext(StrCat("block ", block.idx(), ", ", op->Location()));
    };
    Status schema = CheckOpSchema(op->desc());
    if (!schema.ok()) return located(schema);
    // Every pass places an op by its role (forward, backward, optimize).
    if (op->role() == 0) return located(InvalidArgument("has role 0 (no phase)"));
    Status reads = CheckReadsDefined(block, op, defined);
    if (!reads.ok()) return located(reads);
    auto outputs = InferOpShapes(op->desc(), block);
    if (!outputs.ok()) return located(outputs.status());
    for (const auto& [name, meta] : *outputs) {
      const proto::VarDesc* var = block.FindVar(name);
      if (var == nullptr) {
        return located(NotFound("output var '", name, "' is not declared"));
      }
      TensorMeta declared = MetaOf(*var);
      if (declared != meta) {
        return located(InvalidArgument(
            "output var '", name, "' is declared ", MetaToString(declared),
            " but shape inference gives ", MetaToString(meta)));
      }
      defined.insert(name);
    }
  }
  return Status::OK();
}

Status VerifyProgram(const Program& program) {
  for (int i = 0; i < program.num_blocks(); ++i) {
    LOOM_RETURN_IF_ERROR(VerifyBlock(program.block(i)));
  }
  return Status::OK();
}

}  // namespace loom
