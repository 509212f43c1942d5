// The pass manager with the infrastructure test passes: pipelines as text,
// verification after each pass, instrumentation and bisecting.
#include <sstream>

#include <gtest/gtest.h>

#include "framework/op_builder.h"
#include "framework/shape_inference.h"
#include "passes/pass_manager.h"
#include "passes/test_passes.h"

namespace loom {
namespace {

PassContext TinyContext() {
  RegisterTestPasses();
  Program p;
  Block& b = p.global_block();
  SetMeta(TensorMeta{proto::FP32, {2}}, b.AddVar("x"));
  b.FindVar("x")->set_is_data(true);
  CHECK(AppendOpInferShapes(b, OpDescBuilder("scale").Input("X", "x").Output("Out", "y")).ok());
  return PassContext(ParallelLayout(), 0, std::move(p));
}

TEST(Pipeline, ParsePrintRoundTrip) {
  const std::string text = "tensor-parallel{degree=2},no-op,test-fail{message=a b}";
  auto entries = ParsePipeline(text);
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 3u);
  EXPECT_EQ((*entries)[0].name, "tensor-parallel");
  EXPECT_EQ((*entries)[0].options.at("degree"), "2");
  EXPECT_EQ((*entries)[2].options.at("message"), "a b");
  EXPECT_EQ(PrintPipeline(*entries), text);
  // Options print sorted: a normal form.
  EXPECT_EQ(PrintPipeline(ParsePipeline("p{b=1,a=2}").value()), "p{a=2,b=1}");
}

TEST(Pipeline, SyntaxErrorsSayWhere) {
  EXPECT_EQ(ParsePipeline("a{degree=2").status().message(),
            "pipeline 'a{degree=2' at character 11: missing '}'");
  EXPECT_EQ(ParsePipeline("a,,b").status().message(),
            "pipeline 'a,,b' at character 3: expected a pass name");
  EXPECT_EQ(ParsePipeline("a{x}").status().message(),
            "pipeline 'a{x}' at character 4: expected '='");
  EXPECT_EQ(ParsePipeline("a{x=1,x=2}").status().message(),
            "pipeline 'a{x=1,x=2}' at character 10: option x given twice");
}

TEST(PassManager, ResolvedPipelineIncludesDefaults) {
  RegisterTestPasses();
  PassManager pm;
  ASSERT_TRUE(pm.AddPipeline("no-op,test-fail").ok());
  EXPECT_EQ(pm.PipelineString(), "no-op,test-fail{message=test-fail ran}");
  PassManager bad;
  EXPECT_EQ(bad.AddPipeline("test-fail{mesage=x}").message(),
            "pass test-fail has no option 'mesage' (options: message)");
}

TEST(PassManager, FailureIsPrefixedWithThePass) {
  PassContext ctx = TinyContext();
  PassManager pm;
  ASSERT_TRUE(pm.AddPipeline("no-op,test-fail{message=boom},no-op").ok());
  Status s = pm.Run(ctx);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "test-fail: boom");
  // The first no-op ran; nothing after the failure did.
  EXPECT_EQ(ctx.history(), (std::vector<std::string>{"no-op"}));
}

TEST(PassManager, VerifyEachCatchesABrokenProgram) {
  PassContext ctx = TinyContext();
  PassManager pm;
  ASSERT_TRUE(pm.AddPipeline("test-break-verifier").ok());
  EXPECT_EQ(pm.Run(ctx).message(),
            "failed after test-break-verifier: block 0, op 1 (scale): input X "
            "reads undeclared var 'test.undeclared'");
  PassContext unchecked = TinyContext();
  PassManagerOptions off;
  off.verify_each = false;
  PassManager lax(off);
  ASSERT_TRUE(lax.AddPipeline("test-break-verifier").ok());
  EXPECT_TRUE(lax.Run(unchecked).ok());
}

TEST(PassManager, StampsInsertedOpsWithTheirPass) {
  PassContext ctx = TinyContext();
  PassManagerOptions off;
  off.verify_each = false;
  PassManager pm(off);
  ASSERT_TRUE(pm.AddPipeline("test-break-verifier").ok());
  ASSERT_TRUE(pm.Run(ctx).ok());
  const Block& b = ctx.program().global_block();
  EXPECT_EQ(b.front()->desc().creation_pass(), "");
  EXPECT_EQ(b.back()->desc().creation_pass(), "test-break-verifier");
}

TEST(PassManager, DisablePassesBisects) {
  PassContext ctx = TinyContext();
  PassManagerOptions options;
  options.disable_passes = {"test-fail"};
  PassManager pm(options);
  ASSERT_TRUE(pm.AddPipeline("no-op,test-fail").ok());
  EXPECT_TRUE(pm.Run(ctx).ok());
  EXPECT_EQ(ctx.history(), (std::vector<std::string>{"no-op"}));
}

TEST(PassManager, InstrumentationPrintsAndTimes) {
  PassContext ctx = TinyContext();
  std::ostringstream printed, timed;
  PassManager pm;
  ASSERT_TRUE(pm.AddPipeline("no-op,no-op").ok());
  pm.AddInstrumentation(MakePrintAfter({"no-op"}, false, &printed));
  pm.AddInstrumentation(MakeTimePasses(&timed));
  ASSERT_TRUE(pm.Run(ctx).ok());
  const std::string p = printed.str();
  EXPECT_NE(p.find("// ---- after no-op (no change) ----"), std::string::npos) << p;
  EXPECT_NE(p.find("scale"), std::string::npos);
  const std::string t = timed.str();
  EXPECT_NE(t.find("pass timings (ms):"), std::string::npos);
  EXPECT_NE(t.find("  total"), std::string::npos);
  EXPECT_EQ(std::count(t.begin(), t.end(), '\n'), 4) << t;
}

}  // namespace
}  // namespace loom
