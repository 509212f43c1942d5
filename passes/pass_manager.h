// Runs a pipeline of passes over a PassContext, in the manner of LLVM's and
// MLIR's pass managers: verification after every pass, and instrumentation
// (print-after, timing, dumps) kept outside the passes.
#ifndef LOOM_PASSES_PASS_MANAGER_H_
#define LOOM_PASSES_PASS_MANAGER_H_

#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "passes/pass_pipeline.h"
#include "passes/pass_registry.h"

namespace loom {

// Callbacks around every pass.
class PassInstrumentation {
 public:
  virtual ~PassInstrumentation() = default;
  virtual void BeforePass(const std::string& pass, const PassContext& ctx) {}
  virtual void AfterPass(const std::string& pass, const PassContext& ctx,
                         bool changed, double millis) {}
  // Once, after the whole pipeline.
  virtual void AfterPipeline(const PassContext& ctx) {}
};

// Prints the program (and the plan, once it exists) after the named passes,
// or after all of them.
std::unique_ptr<PassInstrumentation> MakePrintAfter(std::set<std::string> passes,
                                                    bool all, std::ostream* os);
// Reports each pass's wall time after the pipeline.
std::unique_ptr<PassInstrumentation> MakeTimePasses(std::ostream* os);
// Writes NN-<pass>.pbtxt into `dir` after every pass.
std::unique_ptr<PassInstrumentation> MakeDumpAfterEach(std::string dir);

struct PassManagerOptions {
  // Verify the program and every job program after each pass. On in tests;
  // the cost is linear in program size.
  bool verify_each = true;
  // Passes named here are skipped, for bisecting a pipeline without
  // rebuilding.
  std::set<std::string> disable_passes;
};

class PassManager {
 public:
  explicit PassManager(PassManagerOptions options = {})
      : options_(std::move(options)) {}

  // Appends the passes of a textual pipeline; checks names, options and
  // conflicts.
  Status AddPipeline(const std::string& text);
  // Appends passes made from a pipeline parsed before (once, for many
  // ranks); checks conflicts with the passes already added.
  Status AddPipeline(const PassPipeline& pipeline);
  void AddInstrumentation(std::unique_ptr<PassInstrumentation> inst) {
    instrumentations_.push_back(std::move(inst));
  }

  // Runs every pass in order. A failing pass's error, or a verifier error
  // after it, is returned as "<pass>: ..." / "failed after <pass>: ...".
  Status Run(PassContext& ctx);

  // The pipeline as text, every option resolved (defaults included), so
  // that a dump records exactly how to reproduce it.
  std::string PipelineString() const { return pipeline_.ToString(); }

 private:
  PassManagerOptions options_;
  PassPipeline pipeline_;
  // One for each entry of pipeline_.
  std::vector<std::unique_ptr<Pass>> passes_;
  std::vector<std::unique_ptr<PassInstrumentation>> instrumentations_;
};

// Verifies the rank's program and every job program of its plan.
Status VerifyContext(const PassContext& ctx);

}  // namespace loom

#endif  // LOOM_PASSES_PASS_MANAGER_H_
