#include "framework/shape_inference.h"

namespace loom {
namespace {

const google::protobuf::RepeatedPtrField<std::string>* SlotVars(
    const google::protobuf::RepeatedPtrField<proto::OpDesc::Slot>& slots,
    const std::string& name) {
  for (const auto& s : slots) {
    if (s.name() == name) return &s.vars();
  }
  return nullptr;
}

}  // namespace

TensorMeta MetaOf(const proto::VarDesc& var) {
  TensorMeta m;
  m.dtype = var.dtype();
  m.shape.assign(var.shape().begin(), var.shape().end());
  return m;
}

void SetMeta(const TensorMeta& meta, proto::VarDesc* var) {
  var->set_dtype(meta.dtype);
  var->clear_shape();
  for (int64_t d : meta.shape) var->add_shape(d);
}

InferShapeContext::InferShapeContext(const proto::OpDesc& desc,
                                     const Block& block)
    : desc_(desc), block_(block) {
  // Input() hands out references into the cache, so it must never grow past
  // its first allocation.
  int n = 0;
  for (const auto& slot : desc.inputs()) n += slot.vars_size();
  input_cache_.reserve(n);
}

int InferShapeContext::InputCount(const std::string& slot) const {
  const auto* vars = SlotVars(desc_.inputs(), slot);
  return vars == nullptr ? 0 : vars->size();
}

bool InferShapeContext::HasInput(const std::string& slot) const {
  const auto* vars = SlotVars(desc_.inputs(), slot);
  return vars != nullptr && !vars->empty() && !vars->Get(0).empty();
}

const TensorMeta& InferShapeContext::Input(const std::string& slot,
                                           int i) const {
  const auto* vars = SlotVars(desc_.inputs(), slot);
  CHECK(vars != nullptr && i < vars->size())
      << desc_.type() << ": input " << slot << "[" << i << "] is absent";
  const std::string& name = vars->Get(i);
  for (const auto& [n, meta] : input_cache_) {
    if (n == name) return meta;
  }
  const proto::VarDesc* var = block_.FindVar(name);
  CHECK(var != nullptr) << "InferOpShapes checks vars exist: " << name;
  input_cache_.emplace_back(name, MetaOf(*var));
  return input_cache_.back().second;
}

int InferShapeContext::OutputCount(const std::string& slot) const {
  const auto* vars = SlotVars(desc_.outputs(), slot);
  return vars == nullptr ? 0 : vars->size();
}

bool InferShapeContext::HasOutput(const std::string& slot) const {
  const auto* vars = SlotVars(desc_.outputs(), slot);
  if (vars == nullptr) return false;
  for (const auto& v : *vars) {
    if (!v.empty()) return true;
  }
  return false;
}

void InferShapeContext::SetOutput(const std::string& slot, TensorMeta meta,
                                  int i) {
  const auto* vars = SlotVars(desc_.outputs(), slot);
  if (vars == nullptr || i >= vars->size() || vars->Get(i).empty()) return;
  outputs_.emplace_back(vars->Get(i), std::move(meta));
}

StatusOr<std::vector<std::pair<std::string, TensorMeta>>> InferOpShapes(
    const proto::OpDesc& desc, const Block& block) {
  LOOM_RETURN_IF_ERROR(CheckOpSchema(desc));
  const OpSchema* schema = OpRegistry::Global().Find(desc.type());
  for (const auto& slot : desc.inputs()) {
    for (const auto& v : slot.vars()) {
      if (v.empty()) continue;
      if (block.FindVar(v) == nullptr) {
        return NotFound("input ", slot.name(), " reads undeclared var '", v,
                        "'");
      }
    }
  }
  InferShapeContext ctx(desc, block);
  if (!schema->infer_shape()) {
    return Internal("op ", desc.type(), " has no shape inference");
  }
  LOOM_RETURN_IF_ERROR(schema->infer_shape()(ctx));
  for (const auto& slot : desc.outputs()) {
    for (const auto& v : slot.vars()) {
      if (v.empty()) continue;
      bool set = false;
      for (const auto& [n, meta] : ctx.outputs()) set |= (n == v);
      if (!set) {
        return Internal("shape inference of ", desc.type(),
                        " left output ", slot.name(), " ('", v, "') unset");
      }
    }
  }
  return ctx.outputs();
}

namespace {

Status DeclareOutputs(
    Block& block,
    const std::vector<std::pair<std::string, TensorMeta>>& outputs) {
  for (const auto& [name, meta] : outputs) {
    proto::VarDesc* var = block.FindVar(name);
    if (var == nullptr) {
      SetMeta(meta, block.AddVar(name));
    } else if (MetaOf(*var) != meta) {
      return InvalidArgument("output var '", name, "' is declared as ",
                             MetaToString(MetaOf(*var)),
                             " but the op produces ", MetaToString(meta));
    }
  }
  return Status::OK();
}

}  // namespace

Status ReinferShapes(Block& block) {
  for (Op* op : block.ops()) {
    auto outputs = InferOpShapes(op->desc(), block);
    if (!outputs.ok()) return outputs.status().WithContext(op->Location());
    for (const auto& [name, meta] : *outputs) {
      proto::VarDesc* var = block.FindVar(name);
      if (var == nullptr) var = block.AddVar(name);
      SetMeta(meta, var);
    }
  }
  return Status::OK();
}

StatusOr<Op*> AppendOpInferShapes(Block& block, proto::OpDesc desc) {
  auto where = [&] { return StrCat("op ", block.num_ops(), " (", desc.type(), ")"); };
  auto outputs = InferOpShapes(desc, block);
  if (!outputs.ok()) return outputs.status().WithContext(where());
  Status declared = DeclareOutputs(block, *outputs);
  if (!declared.ok()) return declared.WithContext(where());
  return block.AppendOp(std::move(desc));
}

namespace {

StatusOr<Op*> InsertInferShapes(Block& block, const Op* pos, bool after,
                                proto::OpDesc desc) {
  // The location is built only for an error: Location() numbers the block,
  // which every insertion invalidates, so building it eagerly made a pass
  // that inserts n ops quadratic.
  auto where = [&] {
    return StrCat("op inserted ", after ? "after " : "before ", pos->Location(), " (",
                  desc.type(), ")");
  };
  auto outputs = InferOpShapes(desc, block);
  if (!outputs.ok()) return outputs.status().WithContext(where());
  Status declared = DeclareOutputs(block, *outputs);
  if (!declared.ok()) return declared.WithContext(where());
  return after ? block.InsertOpAfter(pos, std::move(desc))
               : block.InsertOpBefore(pos, std::move(desc));
}

}  // namespace

StatusOr<Op*> InsertOpInferShapes(Block& block, const Op* pos,
                                  proto::OpDesc desc) {
  return InsertInferShapes(block, pos, false, std::move(desc));
}

StatusOr<Op*> InsertOpAfterInferShapes(Block& block, const Op* pos,
                                       proto::OpDesc desc) {
  return InsertInferShapes(block, pos, true, std::move(desc));
}

}  // namespace loom
