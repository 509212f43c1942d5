// loom passes: the pass registry as help text.
#include <iostream>

#include "passes/pass_registry.h"
#include "tools/command.h"

namespace loom {

Status RunPasses(const std::vector<std::string>& args) {
  RegisterAllPasses();
  for (const PassInfo* p : PassRegistry::Global().All()) {
    std::cout << p->name << "\n    " << p->summary << "\n";
    for (const PassOption& o : p->options) {
      std::cout << "    " << o.name() << "=" << o.Print(p->defaults) << "  " << o.help() << "; "
                << o.values() << "\n";
    }
    for (const std::string& r : p->requires_passes) {
      std::cout << "    requires " << r << "\n";
    }
  }
  return Status::OK();
}

}  // namespace loom
