#include "tools/report_json.h"

namespace loom {

nlohmann::json ExposedCommJson(const std::array<double, kNumCommCategories>& exposed) {
  nlohmann::json j;
  for (int c = 0; c < kNumCommCategories; ++c) {
    j[CommCategoryName(static_cast<CommCategory>(c))] = exposed[c];
  }
  return j;
}

}  // namespace loom
