// Passes that exist to test the pass manager itself, in the manner of
// LLVM's no-op-module and MLIR's test-pass-crash: one does nothing, one
// fails, one breaks the verifier.
#include "passes/test_passes.h"

#include <mutex>

#include "framework/op_builder.h"
#include "passes/pass_registry.h"

namespace loom {
namespace {

class NoOpPass : public Pass {
 public:
  StatusOr<bool> Run(PassContext&) override { return false; }
};

struct FailOptions {
  std::string message = "test-fail ran";
};

class FailPass : public Pass {
 public:
  explicit FailPass(const FailOptions& options) : message_(options.message) {}
  StatusOr<bool> Run(PassContext&) override { return Internal(message_); }

 private:
  std::string message_;
};

class BreakVerifierPass : public Pass {
 public:
  // Appends an op that reads a var no one declares.
  StatusOr<bool> Run(PassContext& ctx) override {
    ctx.program().global_block().AppendOp(OpDescBuilder("scale")
                                              .Input("X", "test.undeclared")
                                              .Output("Out", "test.out"));
    return true;
  }
};

PassInfo NoOpPassInfo() {
  return PassInfoOf<NoOpPass>("no-op", "does nothing (tests the pass manager)");
}

PassInfo FailPassInfo() {
  PassInfo info = PassInfoOf<FailPass, FailOptions>(
      "test-fail", "fails with a message (tests the pass manager)");
  info.options = {StringOption(&FailOptions::message, "message", "the error message")};
  return info;
}

PassInfo BreakVerifierPassInfo() {
  return PassInfoOf<BreakVerifierPass>(
      "test-break-verifier", "adds an op that reads an undeclared var (tests verify-each)");
}

}  // namespace

void RegisterTestPasses() {
  RegisterAllPasses();
  static std::once_flag once;
  std::call_once(once, [] {
    LOOM_REGISTER_PASS(NoOpPassInfo);
    LOOM_REGISTER_PASS(FailPassInfo);
    LOOM_REGISTER_PASS(BreakVerifierPassInfo);
  });
}

}  // namespace loom
