#include "executor/comm/communicator.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace loom {

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kMax: return "max";
  }
  return "unknown";
}

StatusOr<int> GroupRankOf(const std::string& name, const std::vector<int>& members,
                          int global_rank, const CommOptions& options) {
  const std::string where = StrCat("setup on group ", name);
  if (members.empty()) return InvalidArgument(where, ": no members");
  if (std::set<int>(members.begin(), members.end()).size() != members.size()) {
    return InvalidArgument(where, ": a rank is listed twice");
  }
  auto it = std::find(members.begin(), members.end(), global_rank);
  if (it == members.end()) {
    return InvalidArgument(where, ": rank ", global_rank, " is not a member");
  }
  if (options.timeout.count() <= 0) {
    return InvalidArgument(where, ": the timeout must be positive");
  }
  return static_cast<int>(it - members.begin());
}

std::string FormatTimeout(std::chrono::milliseconds timeout) {
  const int64_t ms = timeout.count();
  if (ms % 1000 == 0) return StrCat(ms / 1000, " s");
  return StrCat(ms, " ms");
}

std::string GroupName(const std::string& kind,
                      const std::vector<int>& members) {
  constexpr size_t kMaxListed = 8;
  std::ostringstream os;
  os << kind << "[";
  if (members.size() <= kMaxListed) {
    for (size_t i = 0; i < members.size(); ++i) {
      os << (i ? "," : "") << members[i];
    }
    os << "]";
  } else {
    for (size_t i = 0; i < 3; ++i) os << members[i] << ",";
    os << "...," << members.back() << "] (" << members.size() << " ranks)";
  }
  return os.str();
}

}  // namespace loom
