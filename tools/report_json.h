// JSON pieces that more than one command's --json report holds.
#ifndef LOOM_TOOLS_REPORT_JSON_H_
#define LOOM_TOOLS_REPORT_JSON_H_

#include <array>

#include <nlohmann/json.hpp>

#include "scheduler/trace.h"

namespace loom {

// Exposed communication by category ("mp", "dp", "p2p", "sharding"), in s.
nlohmann::json ExposedCommJson(const std::array<double, kNumCommCategories>& exposed);

}  // namespace loom

#endif  // LOOM_TOOLS_REPORT_JSON_H_
