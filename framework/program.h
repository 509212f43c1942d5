// Editable C++ classes over the program IR: Program -> Block -> Op.
//
// A Block keeps its ops in a linked list (O(1) insert and erase anywhere) and
// an exact use-def index (var -> producing ops, consuming ops), maintained on
// every edit, so that passes never rescan the program to find a var's users.
// Op positions are numbered lazily: the first OpIndex() after an edit
// renumbers the block in O(n), later calls are O(1).
#ifndef LOOM_FRAMEWORK_PROGRAM_H_
#define LOOM_FRAMEWORK_PROGRAM_H_

#include <list>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "framework/attribute.h"
#include "framework/framework.pb.h"
#include "framework/status.h"
#include "framework/types.h"

namespace loom {

class Block;
class Program;

// One operator. Reads go straight to the proto; edits of inputs and outputs
// go through the owning Block, which keeps its use-def index exact. Other
// fields (attributes, role, stage, stream, events) are edited here.
class Op {
 public:
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;

  const std::string& type() const { return desc_.type(); }
  const proto::OpDesc& desc() const { return desc_; }
  Block* block() const { return block_; }
  int64_t id() const { return desc_.id(); }
  // Position in the block; O(1) unless the block was edited since the last
  // call.
  int index() const;

  // Inputs and outputs by slot. A missing slot reads as empty.
  const google::protobuf::RepeatedPtrField<std::string>& Inputs(
      const std::string& slot) const;
  const google::protobuf::RepeatedPtrField<std::string>& Outputs(
      const std::string& slot) const;
  // The single var in `slot`, or "" if the slot is empty or absent.
  const std::string& Input(const std::string& slot) const;
  const std::string& Output(const std::string& slot) const;
  bool HasInput(const std::string& slot) const { return !Input(slot).empty(); }
  bool HasOutput(const std::string& slot) const {
    return !Output(slot).empty();
  }
  // Every var read / written, in slot order, each name once.
  std::vector<std::string> InputVars() const;
  std::vector<std::string> OutputVars() const;

  // Attributes. A missing attribute reads as the op schema's default; one
  // with neither is an internal error (the verifier reports it first).
  bool HasAttr(const std::string& name) const;
  const proto::Attr* FindAttr(const std::string& name) const;
  template <typename T>
  T GetAttr(const std::string& name) const {
    return AttrValue<T>::Get(LookupAttr(name));
  }
  template <typename T>
  void SetAttr(const std::string& name, const T& value) {
    AttrValue<T>::Set(value, UpsertAttr(name));
  }

  uint32_t role() const { return desc_.role(); }
  void set_role(uint32_t r) { desc_.set_role(r); }
  bool HasRole(uint32_t bit) const { return (desc_.role() & bit) != 0; }

  // Fields the parallel passes annotate.
  proto::OpDesc& annotations() { return desc_; }

  // "op 12 (matmul)"; used as the location of every error about this op.
  std::string Location() const;

 private:
  friend class Block;
  Op(Block* block, proto::OpDesc desc) : block_(block), desc_(std::move(desc)) {}
  const proto::Attr& LookupAttr(const std::string& name) const;
  proto::Attr* UpsertAttr(const std::string& name);

  Block* block_;
  proto::OpDesc desc_;
  std::list<std::unique_ptr<Op>>::iterator self_;
  mutable int index_ = -1;
};

// Iterates a Block's ops in order, yielding Op*.
class OpRange {
 public:
  using ListIt = std::list<std::unique_ptr<Op>>::const_iterator;
  class iterator {
   public:
    explicit iterator(ListIt it) : it_(it) {}
    Op* operator*() const { return it_->get(); }
    iterator& operator++() { ++it_; return *this; }
    bool operator!=(const iterator& o) const { return it_ != o.it_; }
    bool operator==(const iterator& o) const { return it_ == o.it_; }
   private:
    ListIt it_;
  };
  OpRange(ListIt b, ListIt e) : b_(b), e_(e) {}
  iterator begin() const { return iterator(b_); }
  iterator end() const { return iterator(e_); }
 private:
  ListIt b_, e_;
};

class Block {
 public:
  Block(int idx, int parent_idx) : idx_(idx), parent_idx_(parent_idx) {}
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  int idx() const { return idx_; }
  int parent_idx() const { return parent_idx_; }

  // ---- Ops -----------------------------------------------------------------
  OpRange ops() const { return OpRange(ops_.begin(), ops_.end()); }
  size_t num_ops() const { return ops_.size(); }
  bool empty() const { return ops_.empty(); }
  Op* front() const { return ops_.empty() ? nullptr : ops_.front().get(); }
  Op* back() const { return ops_.empty() ? nullptr : ops_.back().get(); }
  // The ops as a vector, in order. O(n); for random access by position.
  std::vector<Op*> OpVector() const;

  Op* AppendOp(proto::OpDesc desc);
  Op* InsertOpBefore(const Op* pos, proto::OpDesc desc);
  Op* InsertOpAfter(const Op* pos, proto::OpDesc desc);
  void EraseOp(Op* op);
  int OpIndex(const Op* op) const;
  // Ids at or above this were never given out in this block.
  int64_t next_op_id() const { return next_id_; }
  // The op with id `id`, or nullptr. O(1).
  Op* FindOpById(int64_t id) const;

  // Input / output edits, keeping the use-def index exact.
  void SetInputs(Op* op, const std::string& slot,
                 const std::vector<std::string>& vars);
  void SetOutputs(Op* op, const std::string& slot,
                  const std::vector<std::string>& vars);
  // Replaces `from` by `to` among the op's inputs (outputs). O(op size).
  void RenameInput(Op* op, const std::string& from, const std::string& to);
  void RenameOutput(Op* op, const std::string& from, const std::string& to);
  // Renames a var everywhere in this block: its desc and every use.
  // O(number of uses).
  Status RenameVar(const std::string& from, const std::string& to);

  // ---- Use-def index ---------------------------------------------------------
  // Ops that write / read `var`, in no particular order. Each op once.
  const std::vector<Op*>& Producers(const std::string& var) const;
  const std::vector<Op*>& Consumers(const std::string& var) const;
  // First writer and last reader by position, or nullptr.
  Op* FirstProducer(const std::string& var) const;
  Op* LastConsumer(const std::string& var) const;

  // ---- Vars ------------------------------------------------------------------
  proto::VarDesc* AddVar(const std::string& name);
  proto::VarDesc* FindVar(const std::string& name);
  const proto::VarDesc* FindVar(const std::string& name) const;
  bool HasVar(const std::string& name) const { return FindVar(name) != nullptr; }
  // Declares `name` here as `src` declares it, with the flat buffer it
  // lives in (VarDesc.flat) if that is not declared here yet; the copy.
  // `src` must declare both.
  proto::VarDesc* CopyVarFrom(const Block& src, const std::string& name);
  void RemoveVar(const std::string& name) { vars_.erase(name); }
  // Sorted by name, so that serialization is deterministic.
  const std::map<std::string, proto::VarDesc>& vars() const { return vars_; }

  void ToProto(proto::BlockDesc* out) const;

 private:
  struct VarUses {
    std::vector<Op*> producers;
    std::vector<Op*> consumers;
  };
  Op* Insert(std::list<std::unique_ptr<Op>>::const_iterator pos,
             proto::OpDesc desc);
  void IndexOp(Op* op);
  void UnindexOp(Op* op);
  void Renumber() const;

  int idx_;
  int parent_idx_;
  std::list<std::unique_ptr<Op>> ops_;
  std::map<std::string, proto::VarDesc> vars_;
  std::unordered_map<std::string, VarUses> uses_;
  std::unordered_map<int64_t, Op*> by_id_;
  int64_t next_id_ = 1;
  mutable bool numbering_valid_ = true;

  friend class Program;  // Clone copies vars directly
};

// A whole program. Move-only; Clone() makes an independent copy.
class Program {
 public:
  Program();
  Program(Program&&) = default;
  Program& operator=(Program&&) = default;
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  static StatusOr<Program> FromProto(const proto::ProgramDesc& desc);
  proto::ProgramDesc ToProto() const;
  Program Clone() const;

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  Block& block(int i) { return *blocks_.at(i); }
  const Block& block(int i) const { return *blocks_.at(i); }
  Block& global_block() { return *blocks_[0]; }
  const Block& global_block() const { return *blocks_[0]; }

 private:
  std::vector<std::unique_ptr<Block>> blocks_;
};

}  // namespace loom

#endif  // LOOM_FRAMEWORK_PROGRAM_H_
