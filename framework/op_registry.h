// The op registry: for each op type its schema (inputs, outputs,
// attributes), its shape/dtype inference and its grad-op maker.
//
// CPU and CUDA kernels live in executor/ and are registered there under the
// same type names; the framework itself never runs an op.
#ifndef LOOM_FRAMEWORK_OP_REGISTRY_H_
#define LOOM_FRAMEWORK_OP_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "framework/attribute.h"
#include "framework/framework.pb.h"
#include "framework/status.h"
#include "framework/types.h"

namespace loom {

class Op;

class InferShapeContext;

struct SlotSpec {
  enum Flags : uint32_t {
    kNone = 0,
    kDuplicable = 1,  // may hold several vars (concat's X, split's Out)
    kOptional = 2,    // may be absent or empty
    kNoGrad = 4,      // never differentiated (ids, labels, masks)
    // Only the meta is read, never the data (add_grad reads X for its shape),
    // so this read does not keep the var's buffer alive.
    kNoBuffer = 8,
  };
  std::string name;
  uint32_t flags = kNone;
  bool duplicable() const { return flags & kDuplicable; }
  bool optional() const { return flags & kOptional; }
  bool no_grad() const { return flags & kNoGrad; }
  bool no_buffer() const { return flags & kNoBuffer; }
};

// The largest finite attribute value: a range up to it excludes infinity.
inline constexpr double kFiniteMax = 3.4028234663852886e38;  // FLT_MAX

struct AttrSpec {
  std::string name;
  proto::AttrType type;
  bool has_default = false;
  proto::Attr default_value;
  // A numeric attribute's allowed range (OpSchema::AttrRange); an open end
  // excludes its bound. Unbounded by default.
  bool bounded = false;
  double lo = 0, hi = 0;
  bool lo_open = false, hi_open = false;
};

using InferShapeFn = std::function<Status(InferShapeContext&)>;

// How an op communicates at run time, in two facts its schema gives (the
// one place that says so): who takes part (CommKind: lowering, the plan
// verifier) and what the call moves (CommCall: the executor's communication
// kernels, the cost model and the profilers dispatch on it, never on the
// op's type).
enum class CommKind : uint8_t {
  kNone,        // computes locally (identity too: it only marks a boundary)
  kCollective,  // every member of its ring runs it together
  kSend,        // to one peer
  kRecv,        // from one peer
};
enum class CommCall : uint8_t {
  kNone,
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kSend,
  kRecv,
};
// "allreduce", "allgather", "reduce_scatter", "broadcast", "send", "recv"
// (the types of the ops that make each call alone); "none".
const char* CommCallName(CommCall call);
// Given a forward op, returns the ops that compute its input gradients. The
// conventions: a grad op reads "<slot>@GRAD" for forward output slots and
// writes "<slot>@GRAD" for forward input slots; autodiff prunes outputs that
// no one needs by setting their name to "".
using GradMakerFn = std::function<std::vector<proto::OpDesc>(
    const proto::OpDesc& forward)>;

class OpSchema {
 public:
  explicit OpSchema(std::string type) : type_(std::move(type)) {}

  OpSchema& Input(std::string name, uint32_t flags = SlotSpec::kNone) {
    inputs_.push_back({std::move(name), flags});
    return *this;
  }
  OpSchema& Output(std::string name, uint32_t flags = SlotSpec::kNone) {
    outputs_.push_back({std::move(name), flags});
    return *this;
  }
  template <typename T>
  OpSchema& Attr(const std::string& name, const T& default_value) {
    AttrSpec spec{name, AttrValue<T>::kType, true,
                  MakeAttr<T>(name, default_value)};
    attrs_.push_back(std::move(spec));
    return *this;
  }
  template <typename T>
  OpSchema& RequiredAttr(const std::string& name) {
    AttrSpec spec{name, AttrValue<T>::kType, false, {}};
    attrs_.push_back(std::move(spec));
    return *this;
  }
  // The declared numeric attribute `name` must lie in [lo, hi], or (lo,
  // ...) / (..., hi) where an end is open: the verifier checks it, so that a
  // layer_norm epsilon of -7 is an error, not a NaN many ops later. For a
  // list attribute, each entry must.
  OpSchema& AttrRange(const std::string& name, double lo, double hi, bool lo_open = false,
                      bool hi_open = false) {
    for (AttrSpec& a : attrs_) {
      if (a.name != name) continue;
      a.bounded = true;
      a.lo = lo;
      a.hi = hi;
      a.lo_open = lo_open;
      a.hi_open = hi_open;
    }
    return *this;
  }
  OpSchema& SetInferShape(InferShapeFn fn) {
    infer_shape_ = std::move(fn);
    return *this;
  }
  OpSchema& SetGradMaker(GradMakerFn fn) {
    grad_maker_ = std::move(fn);
    return *this;
  }
  // Communication ops (allreduce, send, ...) are run by communicators,
  // which make `call`; a send or recv is between two peers, any other call
  // a collective of the op's ring.
  OpSchema& SetCommunication(CommCall call) {
    communication_ = true;
    comm_call_ = call;
    comm_kind_ = call == CommCall::kSend   ? CommKind::kSend
                 : call == CommCall::kRecv ? CommKind::kRecv
                                           : CommKind::kCollective;
    return *this;
  }
  // An op that computes locally but marks a communication boundary
  // (identity: a tensor-parallel boundary whose gradient is an allreduce):
  // the ops autodiff makes for it take the communication role.
  OpSchema& MarkCommunicationBoundary() {
    communication_ = true;
    return *this;
  }
  // The op computes around its calls (the vocabulary-parallel cross
  // entropy: its own shard, then `call`s to combine the shards), so its
  // communication kernel is its own.
  OpSchema& ComputesAroundCall() {
    computes_around_call_ = true;
    return *this;
  }
  OpSchema& Doc(std::string doc) {
    doc_ = std::move(doc);
    return *this;
  }
  // Which inputs this instance reads the data of, where that depends on
  // the outputs it writes: split-backward's halves of matmul_grad each
  // read one operand's data and only the other's meta. An input it does not
  // read is then treated as kNoBuffer (ReadsInputData below).
  using ReadsDataFn = std::function<bool(const Op& op, const std::string& slot)>;
  OpSchema& SetReadsData(ReadsDataFn fn) {
    reads_data_ = std::move(fn);
    return *this;
  }
  // The op's outputs are its input `slot`'s data: the executor makes them
  // views, which copy and allocate nothing, and the cost model prices no
  // work for them. `offsets` says where each output starts in the input
  // (elements), or returns nothing where this instance must copy (a split
  // across rows); without it the one output is the whole input under the
  // same meta. For ops whose outputs are never written in place (programs
  // write each var once per micro-batch). OpViewOf (op_view.h) applies it.
  using ViewOffsetsFn = std::function<std::vector<int64_t>(const Op&)>;
  OpSchema& ViewOf(std::string slot, ViewOffsetsFn offsets = nullptr) {
    view_of_ = std::move(slot);
    view_offsets_ = std::move(offsets);
    return *this;
  }

  // The op's output is its inputs (slot `slot`) laid end to end: where
  // `offsets` gives each input's start in the output (elements), and the
  // program allows it, their producers write them straight into the
  // output's buffer and the op does nothing. OpJoinOf (op_view.h) applies
  // it.
  OpSchema& JoinOf(std::string slot, ViewOffsetsFn offsets) {
    join_of_ = std::move(slot);
    join_offsets_ = std::move(offsets);
    return *this;
  }

  const std::string& type() const { return type_; }
  const std::vector<SlotSpec>& inputs() const { return inputs_; }
  const std::vector<SlotSpec>& outputs() const { return outputs_; }
  const std::vector<AttrSpec>& attrs() const { return attrs_; }
  const InferShapeFn& infer_shape() const { return infer_shape_; }
  const GradMakerFn& grad_maker() const { return grad_maker_; }
  bool differentiable() const { return static_cast<bool>(grad_maker_); }
  bool communication() const { return communication_; }
  CommKind comm_kind() const { return comm_kind_; }
  CommCall comm_call() const { return comm_call_; }
  bool computes_around_call() const { return computes_around_call_; }
  const std::string& doc() const { return doc_; }
  // The input slot the outputs view, or empty; where they start.
  const std::string& view_of() const { return view_of_; }
  const ViewOffsetsFn& view_offsets() const { return view_offsets_; }
  // The input slot laid end to end into the output, or empty.
  const std::string& join_of() const { return join_of_; }
  const ViewOffsetsFn& join_offsets() const { return join_offsets_; }
  const ReadsDataFn& reads_data() const { return reads_data_; }

  const SlotSpec* FindInput(const std::string& name) const;
  const SlotSpec* FindOutput(const std::string& name) const;
  const AttrSpec* FindAttr(const std::string& name) const;

 private:
  std::string type_;
  std::string view_of_;
  ViewOffsetsFn view_offsets_;
  std::string join_of_;
  ViewOffsetsFn join_offsets_;
  ReadsDataFn reads_data_;
  std::vector<SlotSpec> inputs_;
  std::vector<SlotSpec> outputs_;
  std::vector<AttrSpec> attrs_;
  InferShapeFn infer_shape_;
  GradMakerFn grad_maker_;
  bool communication_ = false;
  CommKind comm_kind_ = CommKind::kNone;
  CommCall comm_call_ = CommCall::kNone;
  bool computes_around_call_ = false;
  std::string doc_;
};

class OpRegistry {
 public:
  static OpRegistry& Global();

  // Registering a type twice is a programming error.
  void Register(OpSchema schema);
  const OpSchema* Find(const std::string& type) const;
  // Every registered type, sorted.
  std::vector<std::string> Types() const;

 private:
  std::unordered_map<std::string, std::unique_ptr<OpSchema>> schemas_;
};

// Registers every built-in op once; safe to call from anywhere, any number
// of times. Explicit, so that no linker can drop a registration.
void RegisterAllOps();

// Whether `op` reads the data of its input `slot` (not only its meta): the
// one answer for everything that keeps a buffer alive for a reader or
// prices the bytes it reads. True for an op without a schema.
bool ReadsInputData(const OpSchema* schema, const Op& op, const std::string& slot);

// The comm kind and call of `type`'s schema; kNone for an unknown type.
CommKind CommKindOf(const std::string& type);
CommCall CommCallOf(const std::string& type);

// Reads `name` from the desc, falling back to the schema default. nullptr if
// neither exists.
const proto::Attr* FindAttrOrDefault(const proto::OpDesc& desc,
                                     const std::string& name);

// Checks an op against its schema: known type, known slots, required slots
// present, single-var slots holding one var, attribute names and types, and
// required attributes present. The message names the slot or attribute.
Status CheckOpSchema(const proto::OpDesc& desc);

}  // namespace loom

#endif  // LOOM_FRAMEWORK_OP_REGISTRY_H_
