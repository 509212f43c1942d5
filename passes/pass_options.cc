#include "passes/pass_options.h"

#include <charconv>
#include <cmath>

namespace loom {
namespace pass_options_internal {

std::string IntValues(int64_t min, int64_t max) {
  constexpr int64_t kLowest = std::numeric_limits<int64_t>::min();
  constexpr int64_t kHighest = std::numeric_limits<int64_t>::max();
  if (min == kLowest && max == kHighest) return "an integer";
  if (max == kHighest) return StrCat("an integer >= ", min);
  if (min == kLowest) return StrCat("an integer <= ", max);
  return StrCat("an integer in [", min, ", ", max, "]");
}

StatusOr<int64_t> ParseInt(const std::string& text, int64_t min, int64_t max) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || stop != end) {
    return InvalidArgument("expected ", IntValues(min, max), ", got '", text, "'");
  }
  if (value < min || value > max) {
    return InvalidArgument("expected ", IntValues(min, max), ", got ", value);
  }
  return value;
}

std::string FloatValues(float min, float max) {
  return StrCat("a number in [", PrintFloat(min), ", ", PrintFloat(max), "]");
}

StatusOr<float> ParseFloat(const std::string& text, float min, float max) {
  float value = 0;
  const char* end = text.data() + text.size();
  auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || stop != end || !std::isfinite(value)) {
    return InvalidArgument("expected ", FloatValues(min, max), ", got '", text, "'");
  }
  if (value < min || value > max) {
    return InvalidArgument("expected ", FloatValues(min, max), ", got ", text);
  }
  return value;
}

std::string PrintFloat(float value) {
  // The shortest text that parses back to the same float.
  char buffer[32];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, error == std::errc() ? end : buffer);
}

StatusOr<bool> ParseBool(const std::string& text) {
  if (text == "true") return true;
  if (text == "false") return false;
  return InvalidArgument("expected true or false, got '", text, "'");
}

std::string ChoiceValues(const std::vector<std::string>& names) {
  std::string out = "one of ";
  for (size_t i = 0; i < names.size(); ++i) out += (i > 0 ? ", " : "") + names[i];
  return out;
}

}  // namespace pass_options_internal
}  // namespace loom
