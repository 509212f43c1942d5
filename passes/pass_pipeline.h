// Pass pipelines as text, "a{k=v,k2=v2},b": first as syntax (names and
// option strings), then checked against the registry into each pass's
// typed options.
#ifndef LOOM_PASSES_PASS_PIPELINE_H_
#define LOOM_PASSES_PASS_PIPELINE_H_

#include <any>
#include <map>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace loom {

// One pass as written, before the registry has seen it.
struct PipelineEntry {
  std::string name;
  std::map<std::string, std::string> options;
};

// "a{k=v,k2=v2},b" <-> entries, syntax only. Printing is canonical (options
// sorted), so parse(print(x)) == x and print(parse(s)) is a normal form of s.
StatusOr<std::vector<PipelineEntry>> ParsePipeline(const std::string& text);
std::string PrintPipeline(const std::vector<PipelineEntry>& entries);

// The options written for `info`'s pass ("degree" -> "2") over its
// defaults, each parsed and checked, then the pass's own check across
// them. Errors are one line naming the pass and option:
// "tensor-parallel: option degree: expected an integer >= 1, got 'x'".
StatusOr<std::any> ParsePassOptions(const PassInfo& info,
                                    const std::map<std::string, std::string>& written);
// Every option, defaults included, as text: {"async-allreduce": "true",
// "degree": "2"}; empty for a pass without options.
std::map<std::string, std::string> PassOptionsText(const PassInfo& info,
                                                   const std::any& options);

// A pipeline whose passes are registered and whose options are parsed and
// checked, with no conflicting passes: parse it once, then make its passes
// for as many ranks as need them (PassManager::AddPipeline).
class PassPipeline {
 public:
  struct Entry {
    const PassInfo* info;
    std::any options;  // info->defaults' type
  };

  // Registers the product's passes (RegisterAllPasses) and checks `text`.
  static StatusOr<PassPipeline> Parse(const std::string& text);

  // Appends `more`, checking conflicts across both.
  Status Append(const PassPipeline& more);

  // Every option of every pass, defaults included, so that it records
  // exactly how to reproduce the run; in PrintPipeline's normal form
  // (options sorted), and Parse(p.ToString()) prints as p does.
  std::string ToString() const;

  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;
};

}  // namespace loom

#endif  // LOOM_PASSES_PASS_PIPELINE_H_
