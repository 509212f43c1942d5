// loom ops: lists the registered ops with their slots, attributes and docs.
#include <iostream>

#include "executor/kernel.h"
#include "tools/command.h"

namespace loom {

Status RunOps(const std::vector<std::string>& args) {
  RegisterAllCpuKernels();
  const OpRegistry& registry = OpRegistry::Global();
  for (const std::string& type : registry.Types()) {
    if (!args.empty() && std::find(args.begin(), args.end(), type) == args.end()) {
      continue;
    }
    const OpSchema& s = *registry.Find(type);
    std::cout << type;
    if (s.communication()) std::cout << " [communication]";
    if (KernelRegistry::Cpu().Find(type) == nullptr) std::cout << " [no CPU kernel]";
    std::cout << "\n    " << s.doc() << "\n    inputs:";
    for (const auto& in : s.inputs()) std::cout << ' ' << in.name;
    std::cout << "\n    outputs:";
    for (const auto& out : s.outputs()) std::cout << ' ' << out.name;
    if (!s.attrs().empty()) {
      std::cout << "\n    attrs:";
      for (const auto& a : s.attrs()) {
        std::cout << ' ' << a.name << '='
                  << (a.has_default ? AttrToString(a.default_value) : "<required>");
      }
    }
    std::cout << '\n';
  }
  return Status::OK();
}

}  // namespace loom
