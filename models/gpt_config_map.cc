// GptConfig as key/value text, for plans that record what they were built
// for.
#include <cmath>
#include <cstdio>
#include <functional>

#include "models/gpt.h"

namespace loom {
namespace {

// One config field: how to print it and how to parse it back.
struct Field {
  const char* key;
  std::function<std::string(const GptConfig&)> get;
  std::function<Status(const std::string&, GptConfig&)> set;
};

Field Int(const char* key, int64_t GptConfig::*member) {
  return {key, [member](const GptConfig& c) { return std::to_string(c.*member); },
          [member](const std::string& v, GptConfig& c) -> Status {
            try {
              size_t used = 0;
              const int64_t n = std::stoll(v, &used);
              if (used == v.size()) {
                c.*member = n;
                return Status::OK();
              }
            } catch (...) {
            }
            return InvalidArgument("'", v, "' is not an integer");
          }};
}

Field Float(const char* key, float GptConfig::*member) {
  return {key,
          [member](const GptConfig& c) {
            // Nine significant digits print every float exactly.
            char buf[32];
            std::snprintf(buf, sizeof(buf), "%.9g", c.*member);
            return std::string(buf);
          },
          [member](const std::string& v, GptConfig& c) -> Status {
            try {
              size_t used = 0;
              const float f = std::stof(v, &used);
              if (used == v.size() && std::isfinite(f)) {
                c.*member = f;
                return Status::OK();
              }
            } catch (...) {
            }
            return InvalidArgument("'", v, "' is not a finite number");
          }};
}

Field Bool(const char* key, bool GptConfig::*member) {
  return {key, [member](const GptConfig& c) { return std::string(c.*member ? "true" : "false"); },
          [member](const std::string& v, GptConfig& c) -> Status {
            if (v != "true" && v != "false") {
              return InvalidArgument("'", v, "' is not true or false");
            }
            c.*member = v == "true";
            return Status::OK();
          }};
}

const std::vector<Field>& Fields() {
  static const std::vector<Field>* const fields = new std::vector<Field>{
      Int("vocab_size", &GptConfig::vocab_size),
      Int("seq_len", &GptConfig::seq_len),
      Int("hidden", &GptConfig::hidden),
      Int("num_layers", &GptConfig::num_layers),
      Int("num_heads", &GptConfig::num_heads),
      Int("ffn_hidden", &GptConfig::ffn_hidden),
      Int("batch_size", &GptConfig::batch_size),
      Float("dropout", &GptConfig::dropout),
      Float("init_std", &GptConfig::init_std),
      Bool("tie_embeddings", &GptConfig::tie_embeddings),
      Int("seed", &GptConfig::seed),
  };
  return *fields;
}

}  // namespace

std::map<std::string, std::string> GptConfigToMap(const GptConfig& config) {
  std::map<std::string, std::string> map;
  for (const Field& f : Fields()) map[f.key] = f.get(config);
  return map;
}

StatusOr<GptConfig> GptConfigFromMap(const std::string& name,
                                     const std::map<std::string, std::string>& map) {
  GptConfig c;
  c.name = name;
  for (const Field& f : Fields()) {
    auto it = map.find(f.key);
    if (it == map.end()) return InvalidArgument("model config: no value for ", f.key);
    LOOM_RETURN_IF_ERROR(f.set(it->second, c).WithContext(StrCat("model config: ", f.key)));
  }
  for (const auto& [key, value] : map) {
    bool known = false;
    for (const Field& f : Fields()) known |= key == f.key;
    if (!known) return InvalidArgument("model config: unknown key '", key, "'");
  }
  LOOM_RETURN_IF_ERROR(ValidateGptConfig(c));
  return c;
}

}  // namespace loom
