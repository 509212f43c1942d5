#include "passes/pass_manager.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <utility>

#include "framework/program_printer.h"
#include "framework/serialization.h"
#include "framework/verifier.h"

namespace loom {

Status PassManager::AddPipeline(const std::string& text) {
  LOOM_ASSIGN_OR_RETURN(PassPipeline pipeline, PassPipeline::Parse(text));
  return AddPipeline(pipeline);
}

Status PassManager::AddPipeline(const PassPipeline& pipeline) {
  LOOM_RETURN_IF_ERROR(pipeline_.Append(pipeline));
  for (const PassPipeline::Entry& e : pipeline.entries()) {
    passes_.push_back(e.info->create(e.options));
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
  for (size_t i = 0; i < passes_.size(); ++i) {
    const PassInfo* info = pipeline_.entries()[i].info;
    const std::string& name = info->name;
    if (options_.disable_passes.count(name)) continue;
    for (const std::string& req : info->requires_passes) {
      const auto& h = ctx.history();
      if (std::find(h.begin(), h.end(), req) == h.end()) {
        return FailedPrecondition("pass ", name, " requires pass ", req,
                                  " to run before it");
      }
    }
    for (auto& inst : instrumentations_) inst->BeforePass(name, ctx);
    // Read through the const view: a program read in place stays uncopied
    // until a pass edits it.
    const int64_t first_new_id = std::as_const(ctx).program().global_block().next_op_id();
    auto start = std::chrono::steady_clock::now();
    StatusOr<bool> changed = passes_[i]->Run(ctx);
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    if (!changed.ok()) return changed.status().WithContext(name);
    ctx.RecordRun(name);
    // Stamp what the pass inserted, so a listing says where each op came from.
    for (Op* op : std::as_const(ctx).program().global_block().ops()) {
      if (op->id() >= first_new_id && op->desc().creation_pass().empty()) {
        op->annotations().set_creation_pass(name);
      }
    }
    if (options_.verify_each) {
      Status v = VerifyContext(ctx);
      if (!v.ok()) return v.WithContext(StrCat("failed after ", name));
    }
    for (auto& inst : instrumentations_) inst->AfterPass(name, ctx, *changed, ms);
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
