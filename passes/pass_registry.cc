#include "passes/pass_registry.h"

#include <set>

namespace loom {

PassRegistry& PassRegistry::Global() {
  static PassRegistry* const registry = new PassRegistry();
  return *registry;
}

void PassRegistry::Register(PassInfo info) {
  CHECK(passes_.count(info.name) == 0) << "pass " << info.name << " registered twice";
  CHECK(info.create) << "pass " << info.name << " has no create";
  CHECK(info.options.empty() || info.defaults.has_value())
      << "pass " << info.name << " declares options but no options struct";
  std::set<std::string> names;
  for (const PassOption& o : info.options) {
    CHECK(names.insert(o.name()).second) << "pass " << info.name << ": option " << o.name()
                                         << " declared twice";
    CHECK(!o.Print(info.defaults).empty())
        << "pass " << info.name << ": the default of option " << o.name() << " is not "
        << o.values();
  }
  std::string name = info.name;
  passes_.emplace(name, std::move(info));
}

const PassInfo* PassRegistry::Find(const std::string& name) const {
  auto it = passes_.find(name);
  return it == passes_.end() ? nullptr : &it->second;
}

StatusOr<const PassInfo*> PassRegistry::Lookup(const std::string& name) const {
  if (const PassInfo* info = Find(name)) return info;
  std::string known;
  for (const auto& [n, i] : passes_) known += (known.empty() ? "" : ", ") + n;
  return NotFound("unknown pass '", name, "' (known: ", known, ")");
}

std::vector<const PassInfo*> PassRegistry::All() const {
  std::vector<const PassInfo*> out;
  for (const auto& [name, info] : passes_) out.push_back(&info);
  return out;
}

}  // namespace loom
