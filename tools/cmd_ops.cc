// loom ops: lists the registered ops with their slots, attributes and docs,
// and the devices that have a kernel for each.
#include <cmath>
#include <iostream>

#include "executor/kernel.h"
#include "tools/command.h"

namespace loom {
namespace {

// " (in [0, 1))", " (each in [0, max])" for a list: the range the verifier
// holds a bounded attribute to (OpSchema::AttrRange); "" when unbounded.
std::string RangeOf(const AttrSpec& a) {
  if (!a.bounded) return "";
  const bool list = a.type == proto::INTS || a.type == proto::LONGS || a.type == proto::FLOATS;
  auto bound = [](double v) {
    return std::fabs(v) >= kFiniteMax ? std::string(v < 0 ? "-max" : "max") : StrCat(v);
  };
  return StrCat(" (", list ? "each " : "", "in ", a.lo_open ? "(" : "[", bound(a.lo), ", ",
                bound(a.hi), a.hi_open ? ")" : "]", ")");
}

}  // namespace

Status RunOps(const std::vector<std::string>& args) {
  RegisterAllCpuKernels();
  RegisterAllCudaKernels();
  const OpRegistry& registry = OpRegistry::Global();
  for (const std::string& type : registry.Types()) {
    if (!args.empty() && std::find(args.begin(), args.end(), type) == args.end()) {
      continue;
    }
    const OpSchema& s = *registry.Find(type);
    std::cout << type;
    if (s.communication()) std::cout << " [communication]";
    std::cout << "\n    " << s.doc() << "\n    kernels:";
    bool any = false;
    for (DeviceType device : {DeviceType::kCpu, DeviceType::kCuda}) {
      if (KernelRegistry::For(device).Find(type) == nullptr) continue;
      std::cout << ' ' << DeviceTypeName(device);
      any = true;
    }
    // A collective or transfer alone is the communicators' (Gloo, NCCL).
    if (!any) std::cout << (s.communication() ? " none (the communicators run it)" : " none");
    std::cout << "\n    inputs:";
    for (const auto& in : s.inputs()) std::cout << ' ' << in.name;
    std::cout << "\n    outputs:";
    for (const auto& out : s.outputs()) std::cout << ' ' << out.name;
    if (!s.attrs().empty()) {
      std::cout << "\n    attrs:";
      for (const auto& a : s.attrs()) {
        std::cout << ' ' << a.name << '='
                  << (a.has_default ? AttrToString(a.default_value) : "<required>")
                  << RangeOf(a);
      }
    }
    std::cout << '\n';
  }
  return Status::OK();
}

}  // namespace loom
