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
  void Register(PassInfo info);
  const PassInfo* Find(const std::string& name) const;
  // Sorted by name.
  std::vector<const PassInfo*> All() const;

  // Makes a pass from its registered name and the options written in a
  // pipeline; unknown passes and options are errors naming them.
  StatusOr<std::unique_ptr<Pass>> Create(
      const std::string& name, const std::map<std::string, std::string>& options,
      PassOptions* resolved = nullptr) const;

 private:
  std::map<std::string, PassInfo> passes_;
};

// Registers the PassInfo that `info_fn()` returns.
#define LOOM_REGISTER_PASS(info_fn) \
  ::loom::PassRegistry::Global().Register(info_fn())

void RegisterAllPasses();

}  // namespace loom

#endif  // LOOM_PASSES_PASS_REGISTRY_H_
