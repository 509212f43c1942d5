#include "passes/pass_registry.h"

namespace loom {

PassRegistry& PassRegistry::Global() {
  static PassRegistry* const registry = new PassRegistry();
  return *registry;
}

void PassRegistry::Register(PassInfo info) {
  CHECK(passes_.count(info.name) == 0) << "pass " << info.name
                                       << " registered twice";
  std::string name = info.name;
  passes_.emplace(name, std::move(info));
}

const PassInfo* PassRegistry::Find(const std::string& name) const {
  auto it = passes_.find(name);
  return it == passes_.end() ? nullptr : &it->second;
}

std::vector<const PassInfo*> PassRegistry::All() const {
  std::vector<const PassInfo*> out;
  for (const auto& [name, info] : passes_) out.push_back(&info);
  return out;
}

StatusOr<std::unique_ptr<Pass>> PassRegistry::Create(
    const std::string& name, const std::map<std::string, std::string>& options,
    PassOptions* resolved) const {
  const PassInfo* info = Find(name);
  if (info == nullptr) {
    std::string known;
    for (const auto& [n, i] : passes_) known += (known.empty() ? "" : ", ") + n;
    return NotFound("unknown pass '", name, "' (known: ", known, ")");
  }
  std::map<std::string, std::string> values;
  for (const PassOptionSpec& spec : info->options) {
    if (!spec.default_value.empty()) values[spec.name] = spec.default_value;
  }
  for (const auto& [key, value] : options) {
    bool known = false;
    for (const PassOptionSpec& spec : info->options) known |= spec.name == key;
    if (!known) {
      std::string names;
      for (const auto& spec : info->options) {
        names += (names.empty() ? "" : ", ") + spec.name;
      }
      return InvalidArgument("pass ", name, " has no option '", key, "'",
                             names.empty() ? " (it takes none)"
                                           : StrCat(" (options: ", names, ")"));
    }
    values[key] = value;
  }
  PassOptions opts(name, values);
  if (resolved != nullptr) *resolved = opts;
  return info->create(opts);
}

}  // namespace loom
