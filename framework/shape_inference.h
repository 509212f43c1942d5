// Static shape and dtype inference. Loom programs are fully static (every
// var's shape is known when the program is built), so inference runs when an
// op is appended and again in the verifier, never per step at run time.
#ifndef LOOM_FRAMEWORK_SHAPE_INFERENCE_H_
#define LOOM_FRAMEWORK_SHAPE_INFERENCE_H_

#include <string>
#include <utility>
#include <vector>

#include "framework/op_registry.h"
#include "framework/program.h"

namespace loom {

// What an op's InferShapeFn sees: its attributes, the metas of its inputs,
// and a place to put the metas of its outputs.
class InferShapeContext {
 public:
  InferShapeContext(const proto::OpDesc& desc, const Block& block);

  const proto::OpDesc& desc() const { return desc_; }

  int InputCount(const std::string& slot) const;
  // False for an absent slot and for one holding only a pruned "" var.
  bool HasInput(const std::string& slot) const;
  // The meta of var `i` in input `slot`; the caller has checked the slot
  // exists (CheckOpSchema does for required slots).
  const TensorMeta& Input(const std::string& slot, int i = 0) const;

  int OutputCount(const std::string& slot) const;
  bool HasOutput(const std::string& slot) const;
  // Sets output `i` of `slot`. Ignored when that output is pruned ("").
  void SetOutput(const std::string& slot, TensorMeta meta, int i = 0);
  // Output `slot` gets the meta of input `in_slot` (same index).
  void ShareMeta(const std::string& in_slot, const std::string& out_slot,
                 int i = 0) {
    SetOutput(out_slot, Input(in_slot, i), i);
  }

  template <typename T>
  T Attr(const std::string& name) const {
    const proto::Attr* a = FindAttrOrDefault(desc_, name);
    CHECK(a != nullptr) << desc_.type() << " has no attribute " << name;
    return AttrValue<T>::Get(*a);
  }

  // (var name, meta) for every output set so far.
  const std::vector<std::pair<std::string, TensorMeta>>& outputs() const {
    return outputs_;
  }

 private:
  const proto::OpDesc& desc_;
  const Block& block_;
  // Input metas are looked up once and cached; Input() hands out references.
  mutable std::vector<std::pair<std::string, TensorMeta>> input_cache_;
  std::vector<std::pair<std::string, TensorMeta>> outputs_;
};

// Checks `desc` against its schema, looks up its input vars in `block`, runs
// its inference, and checks every non-pruned output got a meta. Errors name
// the slot or var at fault; the caller adds the op's location.
StatusOr<std::vector<std::pair<std::string, TensorMeta>>> InferOpShapes(
    const proto::OpDesc& desc, const Block& block);

// Appends an op, creating a VarDesc for each output that has none. An
// existing output var must already have the inferred meta. The error names
// the op by the position it would have had.
StatusOr<Op*> AppendOpInferShapes(Block& block, proto::OpDesc desc);

// Same, inserting before (after) `pos`.
StatusOr<Op*> InsertOpInferShapes(Block& block, const Op* pos,
                                  proto::OpDesc desc);
StatusOr<Op*> InsertOpAfterInferShapes(Block& block, const Op* pos,
                                       proto::OpDesc desc);

// Re-runs shape inference over the block in order and rewrites each output
// var's dtype and shape: after a pass changes a parameter's or a data var's
// shape, the change flows through the whole program. O(ops). Errors name
// the op.
Status ReinferShapes(Block& block);

TensorMeta MetaOf(const proto::VarDesc& var);
void SetMeta(const TensorMeta& meta, proto::VarDesc* var);

}  // namespace loom

#endif  // LOOM_FRAMEWORK_SHAPE_INFERENCE_H_
