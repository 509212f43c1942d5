#include "passes/pass_pipeline.h"

#include "passes/pass_registry.h"

namespace loom {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

}  // namespace

StatusOr<std::vector<PipelineEntry>> ParsePipeline(const std::string& text) {
  std::vector<PipelineEntry> entries;
  size_t i = 0;
  auto error = [&](const std::string& what) {
    return InvalidArgument("pipeline '", text, "' at character ", i + 1, ": ",
                           what);
  };
  while (i < text.size()) {
    PipelineEntry e;
    while (i < text.size() && IsNameChar(text[i])) e.name += text[i++];
    if (e.name.empty()) return error("expected a pass name");
    if (i < text.size() && text[i] == '{') {
      ++i;
      while (true) {
        std::string key, value;
        while (i < text.size() && IsNameChar(text[i])) key += text[i++];
        if (key.empty()) return error("expected an option name");
        if (i >= text.size() || text[i] != '=') return error("expected '='");
        ++i;
        while (i < text.size() && text[i] != ',' && text[i] != '}') {
          value += text[i++];
        }
        if (value.empty()) return error("expected a value for " + key);
        if (e.options.count(key)) return error("option " + key + " given twice");
        e.options[key] = value;
        if (i >= text.size()) return error("missing '}'");
        if (text[i++] == '}') break;
      }
    }
    entries.push_back(std::move(e));
    if (i == text.size()) break;
    if (text[i] != ',') return error("expected ',' between passes");
    ++i;
    if (i == text.size()) return error("expected a pass name");
  }
  return entries;
}

std::string PrintPipeline(const std::vector<PipelineEntry>& entries) {
  std::string out;
  for (const PipelineEntry& e : entries) {
    if (!out.empty()) out += ',';
    out += e.name;
    if (e.options.empty()) continue;
    out += '{';
    bool first = true;
    for (const auto& [k, v] : e.options) {
      if (!first) out += ',';
      first = false;
      out += k + '=' + v;
    }
    out += '}';
  }
  return out;
}

StatusOr<std::any> ParsePassOptions(const PassInfo& info,
                                    const std::map<std::string, std::string>& written) {
  std::any options = info.defaults;
  for (const auto& [key, text] : written) {
    const PassOption* option = nullptr;
    for (const PassOption& o : info.options) {
      if (o.name() == key) option = &o;
    }
    if (option == nullptr) {
      std::string names;
      for (const PassOption& o : info.options) names += (names.empty() ? "" : ", ") + o.name();
      return InvalidArgument("pass ", info.name, " has no option '", key, "'",
                             names.empty() ? " (it takes none)"
                                           : StrCat(" (options: ", names, ")"));
    }
    LOOM_RETURN_IF_ERROR(
        option->Parse(text, &options).WithContext(StrCat(info.name, ": option ", key)));
  }
  if (info.check) LOOM_RETURN_IF_ERROR(info.check(options).WithContext(info.name));
  return options;
}

std::map<std::string, std::string> PassOptionsText(const PassInfo& info,
                                                   const std::any& options) {
  std::map<std::string, std::string> text;
  for (const PassOption& o : info.options) text[o.name()] = o.Print(options);
  return text;
}

StatusOr<PassPipeline> PassPipeline::Parse(const std::string& text) {
  RegisterAllPasses();
  LOOM_ASSIGN_OR_RETURN(std::vector<PipelineEntry> written, ParsePipeline(text));
  PassPipeline parsed;
  for (const PipelineEntry& e : written) {
    LOOM_ASSIGN_OR_RETURN(const PassInfo* info, PassRegistry::Global().Lookup(e.name));
    LOOM_ASSIGN_OR_RETURN(std::any options, ParsePassOptions(*info, e.options));
    parsed.entries_.push_back({info, std::move(options)});
  }
  PassPipeline pipeline;
  LOOM_RETURN_IF_ERROR(pipeline.Append(parsed));
  return pipeline;
}

Status PassPipeline::Append(const PassPipeline& more) {
  std::vector<Entry> all = entries_;
  all.insert(all.end(), more.entries_.begin(), more.entries_.end());
  for (const Entry& a : all) {
    for (const std::string& c : a.info->conflicts) {
      for (const Entry& b : all) {
        if (b.info->name == c) {
          return InvalidArgument("pass ", a.info->name, " conflicts with pass ", c);
        }
      }
    }
  }
  entries_ = std::move(all);
  return Status::OK();
}

std::string PassPipeline::ToString() const {
  std::vector<PipelineEntry> written;
  for (const Entry& e : entries_) {
    written.push_back({e.info->name, PassOptionsText(*e.info, e.options)});
  }
  return PrintPipeline(written);
}

}  // namespace loom
