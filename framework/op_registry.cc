#include "framework/op_registry.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "framework/program.h"

namespace loom {

const SlotSpec* OpSchema::FindInput(const std::string& name) const {
  for (const auto& s : inputs_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const SlotSpec* OpSchema::FindOutput(const std::string& name) const {
  for (const auto& s : outputs_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

bool ReadsInputData(const OpSchema* schema, const Op& op, const std::string& slot) {
  if (schema == nullptr) return true;
  const SlotSpec* spec = schema->FindInput(slot);
  if (spec != nullptr && spec->no_buffer()) return false;
  return !schema->reads_data() || schema->reads_data()(op, slot);
}

const AttrSpec* OpSchema::FindAttr(const std::string& name) const {
  for (const auto& a : attrs_) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

OpRegistry& OpRegistry::Global() {
  static OpRegistry* const registry = new OpRegistry();
  return *registry;
}

void OpRegistry::Register(OpSchema schema) {
  std::string type = schema.type();
  CHECK(schemas_.count(type) == 0) << "op " << type << " registered twice";
  schemas_[type] = std::make_unique<OpSchema>(std::move(schema));
}

const OpSchema* OpRegistry::Find(const std::string& type) const {
  auto it = schemas_.find(type);
  return it == schemas_.end() ? nullptr : it->second.get();
}

std::vector<std::string> OpRegistry::Types() const {
  std::vector<std::string> out;
  for (const auto& [type, schema] : schemas_) out.push_back(type);
  std::sort(out.begin(), out.end());
  return out;
}

CommKind CommKindOf(const std::string& type) {
  const OpSchema* schema = OpRegistry::Global().Find(type);
  return schema == nullptr ? CommKind::kNone : schema->comm_kind();
}

CommCall CommCallOf(const std::string& type) {
  const OpSchema* schema = OpRegistry::Global().Find(type);
  return schema == nullptr ? CommCall::kNone : schema->comm_call();
}

const char* CommCallName(CommCall call) {
  switch (call) {
    case CommCall::kNone: return "none";
    case CommCall::kAllReduce: return "allreduce";
    case CommCall::kAllGather: return "allgather";
    case CommCall::kReduceScatter: return "reduce_scatter";
    case CommCall::kBroadcast: return "broadcast";
    case CommCall::kSend: return "send";
    case CommCall::kRecv: return "recv";
  }
  return "none";
}

const proto::Attr* FindAttrOrDefault(const proto::OpDesc& desc,
                                     const std::string& name) {
  for (const auto& a : desc.attrs()) {
    if (a.name() == name) return &a;
  }
  const OpSchema* schema = OpRegistry::Global().Find(desc.type());
  if (schema == nullptr) return nullptr;
  const AttrSpec* spec = schema->FindAttr(name);
  if (spec == nullptr || !spec->has_default) return nullptr;
  return &spec->default_value;
}

namespace {

Status CheckSlots(
    const google::protobuf::RepeatedPtrField<proto::OpDesc::Slot>& slots,
    const std::vector<SlotSpec>& specs, const char* kind,
    const OpSchema& schema) {
  // A slot named twice: readers take the first, presence checks any one, so
  // an empty first and a full second passed both (found by fuzzing).
  std::set<std::string> seen;
  for (const auto& slot : slots) {
    if (!seen.insert(slot.name()).second) {
      return InvalidArgument(kind, " slot '", slot.name(), "' appears twice");
    }
  }
  for (const auto& slot : slots) {
    const SlotSpec* spec = nullptr;
    for (const auto& s : specs) {
      if (s.name == slot.name()) spec = &s;
    }
    if (spec == nullptr) {
      return InvalidArgument("unknown ", kind, " slot '", slot.name(),
                             "' (", schema.type(), " has no such ", kind, ")");
    }
    if (!spec->duplicable() && slot.vars_size() > 1) {
      return InvalidArgument(kind, " slot '", slot.name(), "' holds ",
                             slot.vars_size(), " vars but takes one");
    }
    if (!spec->optional()) {
      for (int i = 0; i < slot.vars_size(); ++i) {
        if (slot.vars(i).empty()) {
          return InvalidArgument(kind, " slot '", slot.name(), "' holds an empty var name",
                                 slot.vars_size() > 1 ? StrCat(" at ", i) : std::string(),
                                 " but is required");
        }
      }
    }
  }
  for (const auto& spec : specs) {
    if (spec.optional()) continue;
    bool present = false;
    for (const auto& slot : slots) {
      if (slot.name() == spec.name && slot.vars_size() > 0) present = true;
    }
    if (!present) {
      return InvalidArgument("missing ", kind, " '", spec.name, "'");
    }
  }
  return Status::OK();
}

// A bounded numeric attribute within its range (AttrSpec); a list's range
// holds for each of its entries.
Status CheckAttrRange(const proto::Attr& attr, const AttrSpec& spec) {
  if (!spec.bounded) return Status::OK();
  std::vector<double> values;
  bool list = true;
  switch (attr.type()) {
    case proto::FLOAT: values = {attr.f()}; list = false; break;
    case proto::INT: values = {static_cast<double>(attr.i())}; list = false; break;
    case proto::LONG: values = {static_cast<double>(attr.l())}; list = false; break;
    case proto::FLOATS: values.assign(attr.floats().begin(), attr.floats().end()); break;
    case proto::INTS: values.assign(attr.ints().begin(), attr.ints().end()); break;
    case proto::LONGS:
      for (int64_t v : attr.longs()) values.push_back(static_cast<double>(v));
      break;
    default: return Status::OK();
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    const bool above = spec.lo_open ? v > spec.lo : v >= spec.lo;
    const bool below = spec.hi_open ? v < spec.hi : v <= spec.hi;
    if (above && below && !std::isnan(v)) continue;
    return InvalidArgument("attribute '", attr.name(), "' ",
                           list ? StrCat("holds ", v, " at ", i) : StrCat("is ", v),
                           ", outside ", spec.lo_open ? "(" : "[", spec.lo, ", ", spec.hi,
                           spec.hi_open ? ")" : "]");
  }
  return Status::OK();
}

}  // namespace

Status CheckOpSchema(const proto::OpDesc& desc) {
  const OpSchema* schema = OpRegistry::Global().Find(desc.type());
  if (schema == nullptr) {
    return NotFound("unknown op type '", desc.type(), "'");
  }
  LOOM_RETURN_IF_ERROR(
      CheckSlots(desc.inputs(), schema->inputs(), "input", *schema));
  LOOM_RETURN_IF_ERROR(
      CheckSlots(desc.outputs(), schema->outputs(), "output", *schema));
  for (int i = 0; i < desc.attrs_size(); ++i) {
    const proto::Attr& attr = desc.attrs(i);
    const AttrSpec* spec = schema->FindAttr(attr.name());
    if (spec == nullptr) {
      return InvalidArgument("unknown attribute '", attr.name(), "'");
    }
    if (attr.type() != spec->type) {
      return InvalidArgument("attribute '", attr.name(), "' has type ",
                             proto::AttrType_Name(attr.type()), ", expected ",
                             proto::AttrType_Name(spec->type));
    }
    for (int j = 0; j < i; ++j) {
      if (desc.attrs(j).name() == attr.name()) {
        return InvalidArgument("attribute '", attr.name(), "' is set twice");
      }
    }
    LOOM_RETURN_IF_ERROR(CheckAttrRange(attr, *spec));
  }
  for (const auto& spec : schema->attrs()) {
    if (spec.has_default) continue;
    bool present = false;
    for (const auto& attr : desc.attrs()) {
      if (attr.name() == spec.name) present = true;
    }
    if (!present) {
      return InvalidArgument("missing required attribute '", spec.name, "'");
    }
  }
  return Status::OK();
}

}  // namespace loom
