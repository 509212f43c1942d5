#include "passes/pass.h"

namespace loom {

PassContext::PassContext(proto::Strategy strategy, int rank, Program program,
                         Program startup)
    : strategy_(std::move(strategy)),
      rank_(rank),
      program_(std::move(program)),
      startup_(std::move(startup)) {
  plan_.rank = rank;
  plan_.coords = coords();
}

StatusOr<std::string> PassOptions::GetString(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) {
    return InvalidArgument("pass ", pass_, ": option '", key, "' is not set");
  }
  return it->second;
}

StatusOr<int64_t> PassOptions::GetInt(const std::string& key) const {
  LOOM_ASSIGN_OR_RETURN(std::string v, GetString(key));
  try {
    size_t used = 0;
    int64_t n = std::stoll(v, &used);
    if (used == v.size()) return n;
  } catch (...) {
  }
  return InvalidArgument("pass ", pass_, ": option ", key, "=", v,
                         " is not an integer");
}

StatusOr<bool> PassOptions::GetBool(const std::string& key) const {
  LOOM_ASSIGN_OR_RETURN(std::string v, GetString(key));
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  return InvalidArgument("pass ", pass_, ": option ", key, "=", v,
                         " is not true or false");
}

}  // namespace loom
