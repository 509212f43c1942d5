#include "framework/op_builder.h"

namespace loom {

std::vector<std::string> SlotVars(
    const google::protobuf::RepeatedPtrField<proto::OpDesc::Slot>& slots,
    const std::string& name) {
  for (const auto& s : slots) {
    if (s.name() == name) return {s.vars().begin(), s.vars().end()};
  }
  return {};
}

OpDescBuilder& OpDescBuilder::Input(const std::string& slot,
                                    const std::vector<std::string>& vars) {
  auto* s = desc_.add_inputs();
  s->set_name(slot);
  for (const auto& v : vars) s->add_vars(v);
  return *this;
}

OpDescBuilder& OpDescBuilder::Output(const std::string& slot,
                                     const std::vector<std::string>& vars) {
  auto* s = desc_.add_outputs();
  s->set_name(slot);
  for (const auto& v : vars) s->add_vars(v);
  return *this;
}

GradOpBuilder::GradOpBuilder(const proto::OpDesc& forward,
                             const std::string& grad_type)
    : forward_(forward), b_(grad_type) {
  for (const auto& a : forward.attrs()) b_.RawAttr(a);
}

GradOpBuilder& GradOpBuilder::ForwardInput(const std::string& slot) {
  auto vars = SlotVars(forward_.inputs(), slot);
  if (!vars.empty()) b_.Input(slot, vars);
  return *this;
}

GradOpBuilder& GradOpBuilder::ForwardOutput(const std::string& slot) {
  auto vars = SlotVars(forward_.outputs(), slot);
  if (!vars.empty()) b_.Input(slot, vars);
  return *this;
}

GradOpBuilder& GradOpBuilder::OutputGrad(const std::string& slot) {
  auto vars = SlotVars(forward_.outputs(), slot);
  for (auto& v : vars) v = GradVarName(v);
  if (!vars.empty()) b_.Input(GradSlot(slot), vars);
  return *this;
}

GradOpBuilder& GradOpBuilder::InputGrad(const std::string& slot) {
  auto vars = SlotVars(forward_.inputs(), slot);
  for (auto& v : vars) v = GradVarName(v);
  if (!vars.empty()) b_.Output(GradSlot(slot), vars);
  return *this;
}

}  // namespace loom
