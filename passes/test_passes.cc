// Passes that exist to test the pass manager itself, in the manner of
// LLVM's no-op-module and MLIR's test-pass-crash: one does nothing, one
// fails, one breaks the verifier.
#include "framework/op_builder.h"
#include "passes/test_passes.h"

namespace loom {
namespace {

class NoOpPass : public Pass {
 public:
  StatusOr<bool> Run(PassContext&) override { return false; }
};

class FailPass : public Pass {
 public:
  explicit FailPass(std::string message) : message_(std::move(message)) {}
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

}  // namespace

PassInfo NoOpPassInfo() {
  PassInfo info;
  info.name = "no-op";
  info.summary = "does nothing (tests the pass manager)";
  info.create = [](const PassOptions&) -> StatusOr<std::unique_ptr<Pass>> {
    return std::unique_ptr<Pass>(new NoOpPass());
  };
  return info;
}

PassInfo FailPassInfo() {
  PassInfo info;
  info.name = "test-fail";
  info.summary = "fails with a message (tests the pass manager)";
  info.options = {{"message", "test-fail ran", "the error message"}};
  info.create = [](const PassOptions& o) -> StatusOr<std::unique_ptr<Pass>> {
    LOOM_ASSIGN_OR_RETURN(std::string message, o.GetString("message"));
    return std::unique_ptr<Pass>(new FailPass(message));
  };
  return info;
}

PassInfo BreakVerifierPassInfo() {
  PassInfo info;
  info.name = "test-break-verifier";
  info.summary = "adds an op that reads an undeclared var (tests verify-each)";
  info.create = [](const PassOptions&) -> StatusOr<std::unique_ptr<Pass>> {
    return std::unique_ptr<Pass>(new BreakVerifierPass());
  };
  return info;
}

}  // namespace loom
