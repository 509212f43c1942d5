// A Scope maps var names to tensors. Scopes nest: a lookup that misses goes
// to the parent, so per-micro-batch scopes can share the step's parameters.
#ifndef LOOM_EXECUTOR_SCOPE_H_
#define LOOM_EXECUTOR_SCOPE_H_

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "executor/tensor.h"

namespace loom {

class Scope {
 public:
  Scope() = default;
  explicit Scope(const Scope* parent) : parent_(parent) {}
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  // The tensor named `name` in this scope, created empty if absent. Pointers
  // stay valid for the scope's lifetime.
  Tensor* Var(const std::string& name);
  // Looks here, then in the parents; nullptr if nowhere.
  Tensor* Find(const std::string& name) const;
  Tensor* FindLocal(const std::string& name) const;
  const Scope* parent() const { return parent_; }
  // Names held locally, sorted.
  std::vector<std::string> LocalNames() const;

 private:
  const Scope* parent_ = nullptr;
  std::unordered_map<std::string, std::unique_ptr<Tensor>> vars_;
};

}  // namespace loom

#endif  // LOOM_EXECUTOR_SCOPE_H_
