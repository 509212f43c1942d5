#include "executor/scope.h"

#include <algorithm>

namespace loom {

Tensor* Scope::Var(const std::string& name) {
  auto& slot = vars_[name];
  if (slot == nullptr) slot = std::make_unique<Tensor>();
  return slot.get();
}

Tensor* Scope::FindLocal(const std::string& name) const {
  auto it = vars_.find(name);
  return it == vars_.end() ? nullptr : it->second.get();
}

Tensor* Scope::Find(const std::string& name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent_) {
    if (Tensor* t = s->FindLocal(name)) return t;
  }
  return nullptr;
}

std::vector<std::string> Scope::LocalNames() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : vars_) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace loom
