#include "passes/pass_manager.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>

#include "framework/program_printer.h"
#include "framework/serialization.h"
#include "framework/verifier.h"

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

Status PassManager::AddPipeline(const std::string& text) {
  RegisterAllPasses();
  LOOM_ASSIGN_OR_RETURN(auto entries, ParsePipeline(text));
  for (const PipelineEntry& e : entries) {
    PassOptions resolved;
    LOOM_ASSIGN_OR_RETURN(
        auto pass, PassRegistry::Global().Create(e.name, e.options, &resolved));
    passes_.push_back({e.name, std::move(pass)});
    resolved_.push_back({e.name, resolved.values()});
  }
  for (const Entry& a : passes_) {
    for (const std::string& c : PassRegistry::Global().Find(a.name)->conflicts) {
      for (const Entry& b : passes_) {
        if (b.name == c) {
          return InvalidArgument("pass ", a.name, " conflicts with pass ", c);
        }
      }
    }
  }
  return Status::OK();
}

Status VerifyContext(const PassContext& ctx) {
  LOOM_RETURN_IF_ERROR(VerifyProgram(ctx.program()));
  for (const auto& [key, program] : ctx.plan().programs) {
    LOOM_RETURN_IF_ERROR(VerifyProgram(program).WithContext(
        StrCat(JobProgramName(key, ctx.plan().num_chunks > 1), " program")));
  }
  return Status::OK();
}

Status PassManager::Run(PassContext& ctx) {
  for (Entry& e : passes_) {
    if (options_.disable_passes.count(e.name)) continue;
    const PassInfo* info = PassRegistry::Global().Find(e.name);
    for (const std::string& req : info->requires_passes) {
      const auto& h = ctx.history();
      if (std::find(h.begin(), h.end(), req) == h.end()) {
        return FailedPrecondition("pass ", e.name, " requires pass ", req,
                                  " to run before it");
      }
    }
    for (auto& inst : instrumentations_) inst->BeforePass(e.name, ctx);
    const int64_t first_new_id = ctx.program().global_block().next_op_id();
    auto start = std::chrono::steady_clock::now();
    StatusOr<bool> changed = e.pass->Run(ctx);
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    if (!changed.ok()) return changed.status().WithContext(e.name);
    ctx.RecordRun(e.name);
    // Stamp what the pass inserted, so a listing says where each op came from.
    for (Op* op : ctx.program().global_block().ops()) {
      if (op->id() >= first_new_id && op->desc().creation_pass().empty()) {
        op->annotations().set_creation_pass(e.name);
      }
    }
    if (options_.verify_each) {
      Status v = VerifyContext(ctx);
      if (!v.ok()) return v.WithContext(StrCat("failed after ", e.name));
    }
    for (auto& inst : instrumentations_) inst->AfterPass(e.name, ctx, *changed, ms);
  }
  for (auto& inst : instrumentations_) inst->AfterPipeline(ctx);
  return Status::OK();
}

namespace {

void PrintContext(const PassContext& ctx, std::ostream& os) {
  if (ctx.plan().programs.empty()) {
    PrintProgram(ctx.program(), os);
    return;
  }
  os << "jobs: " << JobListToString(ctx.plan().jobs, ctx.plan().num_chunks > 1)
     << "\n";
  for (const auto& [key, program] : ctx.plan().programs) {
    os << "== " << JobProgramName(key, ctx.plan().num_chunks > 1)
       << " program ==\n";
    PrintProgram(program, os);
  }
}

class PrintAfter : public PassInstrumentation {
 public:
  PrintAfter(std::set<std::string> passes, bool all, std::ostream* os)
      : passes_(std::move(passes)), all_(all), os_(os) {}
  void AfterPass(const std::string& pass, const PassContext& ctx, bool changed,
                 double) override {
    if (!all_ && !passes_.count(pass)) return;
    *os_ << "// ---- after " << pass << (changed ? "" : " (no change)")
         << " ----\n";
    PrintContext(ctx, *os_);
  }

 private:
  std::set<std::string> passes_;
  bool all_;
  std::ostream* os_;
};

class TimePasses : public PassInstrumentation {
 public:
  explicit TimePasses(std::ostream* os) : os_(os) {}
  void AfterPass(const std::string& pass, const PassContext&, bool,
                 double ms) override {
    times_.emplace_back(pass, ms);
  }
  void AfterPipeline(const PassContext&) override {
    double total = 0;
    for (const auto& [p, ms] : times_) total += ms;
    *os_ << "pass timings (ms):\n";
    for (const auto& [p, ms] : times_) {
      *os_ << "  " << std::setw(10) << std::fixed << std::setprecision(3) << ms
           << "  " << std::setw(5) << std::setprecision(1)
           << (total > 0 ? 100.0 * ms / total : 0.0) << "%  " << p << "\n";
    }
    *os_ << "  " << std::setw(10) << std::setprecision(3) << total
         << "  total\n";
  }

 private:
  std::ostream* os_;
  std::vector<std::pair<std::string, double>> times_;
};

class DumpAfterEach : public PassInstrumentation {
 public:
  explicit DumpAfterEach(std::string dir) : dir_(std::move(dir)) {}
  void AfterPass(const std::string& pass, const PassContext& ctx, bool,
                 double) override {
    char prefix[16];
    std::snprintf(prefix, sizeof(prefix), "%02d-", ++count_);
    Status s = SaveProgram(ctx.program(), dir_ + "/" + prefix + pass + ".pbtxt");
    if (!s.ok()) LOG(WARNING) << "dump after " << pass << ": " << s;
  }

 private:
  std::string dir_;
  int count_ = 0;
};

}  // namespace

std::unique_ptr<PassInstrumentation> MakePrintAfter(std::set<std::string> passes,
                                                    bool all, std::ostream* os) {
  return std::make_unique<PrintAfter>(std::move(passes), all, os);
}

std::unique_ptr<PassInstrumentation> MakeTimePasses(std::ostream* os) {
  return std::make_unique<TimePasses>(os);
}

std::unique_ptr<PassInstrumentation> MakeDumpAfterEach(std::string dir) {
  return std::make_unique<DumpAfterEach>(std::move(dir));
}

}  // namespace loom
