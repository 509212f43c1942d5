// Fluent construction of OpDescs, for model builders, grad makers and passes.
#ifndef LOOM_FRAMEWORK_OP_BUILDER_H_
#define LOOM_FRAMEWORK_OP_BUILDER_H_

#include <string>
#include <vector>

#include "framework/attribute.h"
#include "framework/framework.pb.h"
#include "framework/types.h"

namespace loom {

class OpDescBuilder {
 public:
  explicit OpDescBuilder(const std::string& type) { desc_.set_type(type); }

  OpDescBuilder& Input(const std::string& slot, const std::string& var) {
    return Input(slot, std::vector<std::string>{var});
  }
  OpDescBuilder& Input(const std::string& slot,
                       const std::vector<std::string>& vars);
  OpDescBuilder& Output(const std::string& slot, const std::string& var) {
    return Output(slot, std::vector<std::string>{var});
  }
  OpDescBuilder& Output(const std::string& slot,
                        const std::vector<std::string>& vars);
  template <typename T>
  OpDescBuilder& Attr(const std::string& name, const T& value) {
    *desc_.add_attrs() = MakeAttr(name, value);
    return *this;
  }
  OpDescBuilder& RawAttr(const proto::Attr& attr) {
    *desc_.add_attrs() = attr;
    return *this;
  }
  OpDescBuilder& Role(uint32_t role) {
    desc_.set_role(role);
    return *this;
  }

  const proto::OpDesc& desc() const { return desc_; }
  proto::OpDesc Build() const { return desc_; }
  operator proto::OpDesc() const { return desc_; }  // NOLINT: implicit

 private:
  proto::OpDesc desc_;
};

// Builds a grad op from its forward op, following the grad-slot conventions
// of op_registry.h. Forward attributes are copied.
class GradOpBuilder {
 public:
  GradOpBuilder(const proto::OpDesc& forward, const std::string& grad_type);

  // Passes the forward op's input (output) slot through unchanged.
  GradOpBuilder& ForwardInput(const std::string& slot);
  GradOpBuilder& ForwardOutput(const std::string& slot);
  // Reads the gradient of forward output `slot`, as input "<slot>@GRAD".
  GradOpBuilder& OutputGrad(const std::string& slot);
  // Writes the gradient of forward input `slot`, as output "<slot>@GRAD".
  GradOpBuilder& InputGrad(const std::string& slot);
  template <typename T>
  GradOpBuilder& Attr(const std::string& name, const T& value) {
    b_.Attr(name, value);
    return *this;
  }

  proto::OpDesc Build() const { return b_.Build(); }
  operator proto::OpDesc() const { return b_.Build(); }  // NOLINT: implicit

 private:
  const proto::OpDesc& forward_;
  OpDescBuilder b_;
};

// The vars of a slot of a desc, or empty.
std::vector<std::string> SlotVars(
    const google::protobuf::RepeatedPtrField<proto::OpDesc::Slot>& slots,
    const std::string& name);

// "<slot>@GRAD": the grad op slot that carries the gradient of `slot`.
inline std::string GradSlot(const std::string& slot) {
  return slot + kGradSuffix;
}

}  // namespace loom

#endif  // LOOM_FRAMEWORK_OP_BUILDER_H_
