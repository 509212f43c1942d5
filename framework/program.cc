#include "framework/program.h"

#include <algorithm>
#include <sstream>
#include <string_view>
#include <unordered_set>

#include "framework/op_registry.h"

namespace loom {
namespace {

using StringList = google::protobuf::RepeatedPtrField<std::string>;

const StringList& EmptyList() {
  static const StringList* const kEmpty = new StringList();
  return *kEmpty;
}

const std::string& EmptyString() {
  static const std::string* const kEmpty = new std::string();
  return *kEmpty;
}

const StringList& FindSlot(
    const google::protobuf::RepeatedPtrField<proto::OpDesc::Slot>& slots,
    const std::string& name) {
  for (const auto& slot : slots) {
    if (slot.name() == name) return slot.vars();
  }
  return EmptyList();
}

proto::OpDesc::Slot* FindOrAddSlot(
    google::protobuf::RepeatedPtrField<proto::OpDesc::Slot>* slots,
    const std::string& name) {
  for (auto& slot : *slots) {
    if (slot.name() == name) return &slot;
  }
  proto::OpDesc::Slot* slot = slots->Add();
  slot->set_name(name);
  return slot;
}

std::vector<std::string> UniqueVars(
    const google::protobuf::RepeatedPtrField<proto::OpDesc::Slot>& slots) {
  int named = 0;
  for (const auto& slot : slots) named += slot.vars_size();
  std::vector<std::string> out;
  out.reserve(named);
  // Most ops name a few vars, which a scan dedups fastest; a bucket's
  // collective or update names hundreds, which a set keeps linear.
  constexpr int kScanned = 16;
  std::unordered_set<std::string_view> seen;
  for (const auto& slot : slots) {
    for (const auto& v : slot.vars()) {
      if (v.empty()) continue;
      const bool fresh = named <= kScanned ? std::find(out.begin(), out.end(), v) == out.end()
                                           : seen.insert(v).second;
      if (fresh) out.push_back(v);
    }
  }
  return out;
}

void EraseOne(std::vector<Op*>* ops, Op* op) {
  auto it = std::find(ops->begin(), ops->end(), op);
  CHECK(it != ops->end()) << "use-def index lost " << op->type();
  ops->erase(it);
}

}  // namespace

// ---- Op --------------------------------------------------------------------

int Op::index() const { return block_->OpIndex(this); }

const StringList& Op::Inputs(const std::string& slot) const {
  return FindSlot(desc_.inputs(), slot);
}
const StringList& Op::Outputs(const std::string& slot) const {
  return FindSlot(desc_.outputs(), slot);
}
const std::string& Op::Input(const std::string& slot) const {
  const StringList& vars = Inputs(slot);
  return vars.empty() ? EmptyString() : vars.Get(0);
}
const std::string& Op::Output(const std::string& slot) const {
  const StringList& vars = Outputs(slot);
  return vars.empty() ? EmptyString() : vars.Get(0);
}
std::vector<std::string> Op::InputVars() const {
  return UniqueVars(desc_.inputs());
}
std::vector<std::string> Op::OutputVars() const {
  return UniqueVars(desc_.outputs());
}

const proto::Attr* Op::FindAttr(const std::string& name) const {
  for (const auto& a : desc_.attrs()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

bool Op::HasAttr(const std::string& name) const {
  return FindAttr(name) != nullptr;
}

const proto::Attr& Op::LookupAttr(const std::string& name) const {
  const proto::Attr* a = FindAttrOrDefault(desc_, name);
  CHECK(a != nullptr) << Location() << ": attribute " << name
                      << " is neither set nor defaulted";
  return *a;
}

proto::Attr* Op::UpsertAttr(const std::string& name) {
  for (auto& a : *desc_.mutable_attrs()) {
    if (a.name() == name) return &a;
  }
  proto::Attr* a = desc_.add_attrs();
  a->set_name(name);
  return a;
}

std::string Op::Location() const {
  return StrCat("op ", index(), " (", type(), ")");
}

// ---- Block -----------------------------------------------------------------

std::vector<Op*> Block::OpVector() const {
  std::vector<Op*> out;
  out.reserve(ops_.size());
  for (const auto& op : ops_) out.push_back(op.get());
  return out;
}

Op* Block::Insert(std::list<std::unique_ptr<Op>>::const_iterator pos,
                  proto::OpDesc desc) {
  if (desc.id() <= 0 || by_id_.count(desc.id())) desc.set_id(next_id_);
  next_id_ = std::max(next_id_, desc.id() + 1);
  auto it = ops_.insert(pos, std::unique_ptr<Op>(new Op(this, std::move(desc))));
  Op* op = it->get();
  op->self_ = it;
  by_id_[op->id()] = op;
  IndexOp(op);
  // Appending keeps the numbering valid; any other insert shifts positions.
  if (numbering_valid_ && std::next(it) == ops_.end()) {
    op->index_ = static_cast<int>(ops_.size()) - 1;
  } else {
    numbering_valid_ = false;
  }
  return op;
}

Op* Block::AppendOp(proto::OpDesc desc) {
  return Insert(ops_.end(), std::move(desc));
}

Op* Block::InsertOpBefore(const Op* pos, proto::OpDesc desc) {
  CHECK_EQ(pos->block_, this);
  return Insert(pos->self_, std::move(desc));
}

Op* Block::InsertOpAfter(const Op* pos, proto::OpDesc desc) {
  CHECK_EQ(pos->block_, this);
  return Insert(std::next(pos->self_), std::move(desc));
}

void Block::EraseOp(Op* op) {
  CHECK_EQ(op->block_, this);
  UnindexOp(op);
  by_id_.erase(op->id());
  if (std::next(op->self_) != ops_.end()) numbering_valid_ = false;
  ops_.erase(op->self_);
}

Op* Block::FindOpById(int64_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second;
}

int Block::OpIndex(const Op* op) const {
  if (!numbering_valid_) Renumber();
  return op->index_;
}

void Block::Renumber() const {
  int i = 0;
  for (const auto& op : ops_) op->index_ = i++;
  numbering_valid_ = true;
}

void Block::IndexOp(Op* op) {
  for (const std::string& v : op->InputVars()) uses_[v].consumers.push_back(op);
  for (const std::string& v : op->OutputVars()) uses_[v].producers.push_back(op);
}

void Block::UnindexOp(Op* op) {
  for (const std::string& v : op->InputVars()) EraseOne(&uses_[v].consumers, op);
  for (const std::string& v : op->OutputVars()) EraseOne(&uses_[v].producers, op);
}

void Block::SetInputs(Op* op, const std::string& slot,
                      const std::vector<std::string>& vars) {
  UnindexOp(op);
  auto* s = FindOrAddSlot(op->desc_.mutable_inputs(), slot);
  s->clear_vars();
  for (const auto& v : vars) s->add_vars(v);
  IndexOp(op);
}

void Block::SetOutputs(Op* op, const std::string& slot,
                       const std::vector<std::string>& vars) {
  UnindexOp(op);
  auto* s = FindOrAddSlot(op->desc_.mutable_outputs(), slot);
  s->clear_vars();
  for (const auto& v : vars) s->add_vars(v);
  IndexOp(op);
}

void Block::RenameInput(Op* op, const std::string& from, const std::string& to) {
  UnindexOp(op);
  for (auto& slot : *op->desc_.mutable_inputs()) {
    for (auto& v : *slot.mutable_vars()) {
      if (v == from) v = to;
    }
  }
  IndexOp(op);
}

void Block::RenameOutput(Op* op, const std::string& from,
                         const std::string& to) {
  UnindexOp(op);
  for (auto& slot : *op->desc_.mutable_outputs()) {
    for (auto& v : *slot.mutable_vars()) {
      if (v == from) v = to;
    }
  }
  IndexOp(op);
}

Status Block::RenameVar(const std::string& from, const std::string& to) {
  if (from == to) return Status::OK();
  auto to_uses = uses_.find(to);
  if (HasVar(to) ||
      (to_uses != uses_.end() && (!to_uses->second.producers.empty() ||
                                  !to_uses->second.consumers.empty()))) {
    return AlreadyExists("cannot rename var ", from, " to ", to, ": ", to,
                         " already exists");
  }
  auto node = vars_.extract(from);
  if (!node.empty()) {
    node.key() = to;
    node.mapped().set_name(to);
    vars_.insert(std::move(node));
  }
  auto it = uses_.find(from);
  if (it == uses_.end()) return Status::OK();
  // Only the name changes, so the index entry moves whole: no per-op
  // re-indexing, and the rename costs O(uses), not O(uses^2).
  VarUses uses = std::move(it->second);
  uses_.erase(it);
  auto rename = [&](google::protobuf::RepeatedPtrField<proto::OpDesc::Slot>*
                        slots) {
    for (auto& slot : *slots) {
      for (auto& v : *slot.mutable_vars()) {
        if (v == from) v = to;
      }
    }
  };
  for (Op* op : uses.consumers) rename(op->desc_.mutable_inputs());
  for (Op* op : uses.producers) rename(op->desc_.mutable_outputs());
  uses_[to] = std::move(uses);
  return Status::OK();
}

const std::vector<Op*>& Block::Producers(const std::string& var) const {
  static const std::vector<Op*>* const kNone = new std::vector<Op*>();
  auto it = uses_.find(var);
  return it == uses_.end() ? *kNone : it->second.producers;
}

const std::vector<Op*>& Block::Consumers(const std::string& var) const {
  static const std::vector<Op*>* const kNone = new std::vector<Op*>();
  auto it = uses_.find(var);
  return it == uses_.end() ? *kNone : it->second.consumers;
}

Op* Block::FirstProducer(const std::string& var) const {
  Op* best = nullptr;
  for (Op* op : Producers(var)) {
    if (best == nullptr || OpIndex(op) < OpIndex(best)) best = op;
  }
  return best;
}

Op* Block::LastConsumer(const std::string& var) const {
  Op* best = nullptr;
  for (Op* op : Consumers(var)) {
    if (best == nullptr || OpIndex(op) > OpIndex(best)) best = op;
  }
  return best;
}

proto::VarDesc* Block::AddVar(const std::string& name) {
  proto::VarDesc& v = vars_[name];
  v.set_name(name);
  return &v;
}

proto::VarDesc* Block::CopyVarFrom(const Block& src, const std::string& name) {
  const proto::VarDesc* from = src.FindVar(name);
  CHECK(from != nullptr) << "var '" << name << "' is not declared in the source block";
  proto::VarDesc* to = AddVar(name);
  *to = *from;
  if (from->has_flat() && !HasVar(from->flat().buffer())) {
    const proto::VarDesc* buffer = src.FindVar(from->flat().buffer());
    CHECK(buffer != nullptr) << "flat buffer '" << from->flat().buffer() << "' of '" << name
                             << "' is not declared in the source block";
    *AddVar(buffer->name()) = *buffer;
  }
  return to;
}

proto::VarDesc* Block::FindVar(const std::string& name) {
  auto it = vars_.find(name);
  return it == vars_.end() ? nullptr : &it->second;
}

const proto::VarDesc* Block::FindVar(const std::string& name) const {
  auto it = vars_.find(name);
  return it == vars_.end() ? nullptr : &it->second;
}

void Block::ToProto(proto::BlockDesc* out) const {
  out->set_idx(idx_);
  out->set_parent_idx(parent_idx_);
  out->mutable_vars()->Reserve(static_cast<int>(vars_.size()));
  for (const auto& [name, var] : vars_) *out->add_vars() = var;
  out->mutable_ops()->Reserve(static_cast<int>(ops_.size()));
  for (const auto& op : ops_) *out->add_ops() = op->desc();
}

// ---- Program ---------------------------------------------------------------

Program::Program() { blocks_.push_back(std::make_unique<Block>(0, -1)); }

StatusOr<Program> Program::FromProto(const proto::ProgramDesc& desc) {
  Program program;
  program.blocks_.clear();
  if (desc.blocks_size() == 0) {
    return InvalidArgument("program has no blocks");
  }
  for (int i = 0; i < desc.blocks_size(); ++i) {
    const proto::BlockDesc& b = desc.blocks(i);
    if (b.idx() != i) {
      return InvalidArgument("block ", i, " has idx ", b.idx());
    }
    if (b.parent_idx() >= i) {
      return InvalidArgument("block ", i, " has parent ", b.parent_idx(),
                             ", which does not precede it");
    }
    auto block = std::make_unique<Block>(i, b.parent_idx());
    for (const auto& v : b.vars()) {
      if (block->HasVar(v.name())) {
        return InvalidArgument("block ", i, ": var ", v.name(),
                               " is declared twice");
      }
      *block->AddVar(v.name()) = v;
    }
    for (const auto& op : b.ops()) block->AppendOp(op);
    program.blocks_.push_back(std::move(block));
  }
  return program;
}

proto::ProgramDesc Program::ToProto() const {
  proto::ProgramDesc desc;
  for (const auto& b : blocks_) b->ToProto(desc.add_blocks());
  return desc;
}

Program Program::Clone() const {
  // Block by block, without a round trip through one ProgramDesc: planning
  // clones the whole training program for every rank it plans.
  Program copy;
  copy.blocks_.clear();
  for (const auto& b : blocks_) {
    auto block = std::make_unique<Block>(b->idx(), b->parent_idx());
    block->vars_ = b->vars_;
    for (Op* op : b->ops()) block->AppendOp(op->desc());
    block->next_id_ = std::max(block->next_id_, b->next_id_);
    copy.blocks_.push_back(std::move(block));
  }
  return copy;
}

}  // namespace loom
