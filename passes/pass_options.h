// Typed pass options.
//
// A pass declares its options as a plain struct whose member initializers
// are the defaults, and lists each field once, in its PassInfo, under the
// name pipelines write it with, with its help and the values it takes:
//
//   struct RecomputeOptions {            // passes/recompute_pass.cc
//     Granularity granularity = Granularity::kFull;
//     int64_t layers = 0;
//   };
//   PassInfo RecomputePassInfo() {
//     using O = RecomputeOptions;
//     PassInfo info = PassInfoOf<RecomputePass, O>("recompute", "recomputes activations");
//     info.options = {
//         EnumOption(&O::granularity, "granularity", "what to recompute",
//                    {{"full", Granularity::kFull}, {"selective", Granularity::kSelective}}),
//         IntOption(&O::layers, "layers", "layers of each chunk (0: all)", /*min=*/0)};
//     return info;
//   }
//
// RecomputePass's constructor takes a `const RecomputeOptions&`. The
// pipeline parser (PassPipeline::Parse) turns "recompute{layers=2}" into that
// struct and checks every value, once; `loom passes` prints the same table
// (in declaration order), and a pipeline prints back with every option
// (PassPipeline::ToString).
#ifndef LOOM_PASSES_PASS_OPTIONS_H_
#define LOOM_PASSES_PASS_OPTIONS_H_

#include <any>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "framework/status.h"

namespace loom {

// One declared option. Its field lives in the pass's options struct, which
// the registry holds as a std::any of that struct's type.
class PassOption {
 public:
  // Sets the field from its text; the error says what was expected
  // ("expected an integer, got 'x'"), the caller adds the pass and option.
  using ParseFn = std::function<Status(const std::string& text, std::any* options)>;
  using PrintFn = std::function<std::string(const std::any& options)>;

  PassOption(std::string name, std::string help, std::string values, ParseFn parse,
             PrintFn print)
      : name_(std::move(name)),
        help_(std::move(help)),
        values_(std::move(values)),
        parse_(std::move(parse)),
        print_(std::move(print)) {}

  // As written in pipelines: "bucket-bytes".
  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  // The values it takes, for help and errors: "an integer >= 1".
  const std::string& values() const { return values_; }

  Status Parse(const std::string& text, std::any* options) const { return parse_(text, options); }
  // The field's value as a pipeline writes it.
  std::string Print(const std::any& options) const { return print_(options); }

 private:
  std::string name_;
  std::string help_;
  std::string values_;
  ParseFn parse_;
  PrintFn print_;
};

namespace pass_options_internal {

template <typename O, typename T>
T& FieldOf(std::any* options, T O::*field) {
  return std::any_cast<O&>(*options).*field;
}
template <typename O, typename T>
const T& FieldOf(const std::any& options, T O::*field) {
  return std::any_cast<const O&>(options).*field;
}

// "an integer", "an integer >= 1", "an integer in [2, 1024]".
std::string IntValues(int64_t min, int64_t max);
StatusOr<int64_t> ParseInt(const std::string& text, int64_t min, int64_t max);
StatusOr<bool> ParseBool(const std::string& text);
// "a number in [0, 1e+06]"
std::string FloatValues(float min, float max);
StatusOr<float> ParseFloat(const std::string& text, float min, float max);
std::string PrintFloat(float value);
// "one of a, b, c"
std::string ChoiceValues(const std::vector<std::string>& names);

}  // namespace pass_options_internal

template <typename O>
PassOption IntOption(int64_t O::*field, std::string name, std::string help,
                     int64_t min = std::numeric_limits<int64_t>::min(),
                     int64_t max = std::numeric_limits<int64_t>::max()) {
  namespace in = pass_options_internal;
  return PassOption(
      std::move(name), std::move(help), in::IntValues(min, max),
      [field, min, max](const std::string& text, std::any* options) -> Status {
        LOOM_ASSIGN_OR_RETURN(in::FieldOf(options, field), in::ParseInt(text, min, max));
        return Status::OK();
      },
      [field](const std::any& options) { return std::to_string(in::FieldOf(options, field)); });
}

// A finite float in [min, max], printed so that it parses back the same.
template <typename O>
PassOption FloatOption(float O::*field, std::string name, std::string help, float min,
                       float max) {
  namespace in = pass_options_internal;
  return PassOption(
      std::move(name), std::move(help), in::FloatValues(min, max),
      [field, min, max](const std::string& text, std::any* options) -> Status {
        LOOM_ASSIGN_OR_RETURN(in::FieldOf(options, field), in::ParseFloat(text, min, max));
        return Status::OK();
      },
      [field](const std::any& options) { return in::PrintFloat(in::FieldOf(options, field)); });
}

// Written "true" or "false".
template <typename O>
PassOption BoolOption(bool O::*field, std::string name, std::string help) {
  namespace in = pass_options_internal;
  return PassOption(
      std::move(name), std::move(help), "true or false",
      [field](const std::string& text, std::any* options) -> Status {
        LOOM_ASSIGN_OR_RETURN(in::FieldOf(options, field), in::ParseBool(text));
        return Status::OK();
      },
      [field](const std::any& options) -> std::string {
        return in::FieldOf(options, field) ? "true" : "false";
      });
}

// Any text a pipeline can hold (no ',' or '}').
template <typename O>
PassOption StringOption(std::string O::*field, std::string name, std::string help) {
  namespace in = pass_options_internal;
  return PassOption(
      std::move(name), std::move(help), "a string",
      [field](const std::string& text, std::any* options) -> Status {
        in::FieldOf(options, field) = text;
        return Status::OK();
      },
      [field](const std::any& options) { return in::FieldOf(options, field); });
}

// One of named values of any type T (a schedule's ScheduleInfo*, an enum):
// the field holds the value, pipelines write its name.
template <typename O, typename T>
PassOption EnumOption(T O::*field, std::string name, std::string help,
                      std::vector<std::pair<std::string, T>> choices) {
  namespace in = pass_options_internal;
  std::vector<std::string> names;
  for (const auto& choice : choices) names.push_back(choice.first);
  const std::string values = in::ChoiceValues(names);
  return PassOption(
      std::move(name), std::move(help), values,
      [field, choices, values](const std::string& text, std::any* options) -> Status {
        for (const auto& [choice_name, value] : choices) {
          if (choice_name != text) continue;
          in::FieldOf(options, field) = value;
          return Status::OK();
        }
        return InvalidArgument("expected ", values, ", got '", text, "'");
      },
      [field, choices](const std::any& options) -> std::string {
        for (const auto& [choice_name, value] : choices) {
          if (value == in::FieldOf(options, field)) return choice_name;
        }
        return "";  // PassRegistry::Register rejects a default that is no choice
      });
}

// One of `choices`, kept as the text.
template <typename O>
PassOption ChoiceOption(std::string O::*field, std::string name, std::string help,
                        const std::vector<std::string>& choices) {
  std::vector<std::pair<std::string, std::string>> named;
  for (const std::string& c : choices) named.emplace_back(c, c);
  return EnumOption(field, std::move(name), std::move(help), std::move(named));
}

}  // namespace loom

#endif  // LOOM_PASSES_PASS_OPTIONS_H_
