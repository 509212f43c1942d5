// The table of passes. Each pass registers one PassInfo, explicitly, from
// RegisterAllPasses() (no static registrars a linker could drop).
#ifndef LOOM_PASSES_PASS_REGISTRY_H_
#define LOOM_PASSES_PASS_REGISTRY_H_

#include <map>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace loom {

class PassRegistry {
 public:
  static PassRegistry& Global();
  // Checks the entry: a new name, distinct option names, each default
  // printable (a choice's default among its choices).
  void Register(PassInfo info);
  const PassInfo* Find(const std::string& name) const;
  // Find, or an error naming the passes there are.
  StatusOr<const PassInfo*> Lookup(const std::string& name) const;
  // Sorted by name.
  std::vector<const PassInfo*> All() const;

 private:
  std::map<std::string, PassInfo> passes_;
};

// Registers the PassInfo that `info_fn()` returns.
#define LOOM_REGISTER_PASS(info_fn) \
  ::loom::PassRegistry::Global().Register(info_fn())

// The product's passes (and the ops they build); once, however often
// called. The passes that test the pass manager are registered only by
// RegisterTestPasses (test_passes.h).
void RegisterAllPasses();

}  // namespace loom

#endif  // LOOM_PASSES_PASS_REGISTRY_H_
