// dropout: the seeded mask, upscaling, is_test, the gradient and p errors.
#include <cmath>

#include <gtest/gtest.h>

#include "executor/serial_executor.h"
#include "framework/op_builder.h"
#include "framework/shape_inference.h"
#include "unittests/grad_check.h"

namespace loom {
namespace {

using testing::CheckGrad;
using testing::GradCheckCase;
using testing::RandomTensor;

struct DropoutResult {
  std::vector<float> out;
  std::vector<bool> mask;
};

DropoutResult RunDropout(const Tensor& x, float p, int64_t seed,
                         bool is_test = false) {
  RegisterAllCpuKernels();
  Program prog;
  Block& b = prog.global_block();
  SetMeta(x.meta(), b.AddVar("x"));
  b.FindVar("x")->set_is_data(true);
  auto op = AppendOpInferShapes(b, OpDescBuilder("dropout")
                                       .Input("X", "x")
                                       .Output("Out", "out")
                                       .Output("Mask", "mask")
                                       .Attr("dropout_prob", p)
                                       .Attr("seed", seed)
                                       .Attr("is_test", is_test));
  CHECK(op.ok()) << op.status();
  EXPECT_EQ(MetaOf(*b.FindVar("mask")), (TensorMeta{proto::BOOL, x.shape()}));
  Scope scope;
  scope.Var("x")->CopyFrom(x);
  auto exec = SerialExecutor::Create(prog, &scope, {{"out", "mask"}});
  CHECK(exec.ok()) << exec.status();
  Status s = (*exec)->Run();
  CHECK(s.ok()) << s;
  DropoutResult r;
  r.out = scope.Find("out")->ToFloatVector();
  const bool* m = scope.Find("mask")->data<bool>();
  r.mask.assign(m, m + x.numel());
  return r;
}

TEST(DropoutForward, SeedDeterminesMask) {
  Tensor x = RandomTensor({1000}, 1);
  DropoutResult a = RunDropout(x, 0.5f, 7);
  DropoutResult b = RunDropout(x, 0.5f, 7);
  DropoutResult c = RunDropout(x, 0.5f, 8);
  EXPECT_EQ(a.mask, b.mask);
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.mask, c.mask);
  // Different seeds should agree about as often as chance says (1/2).
  int same = 0;
  for (size_t i = 0; i < a.mask.size(); ++i) same += a.mask[i] == c.mask[i];
  EXPECT_NEAR(same / 1000.0, 0.5, 0.06);
}

TEST(DropoutForward, KeptFractionAndUpscale) {
  const float p = 0.3f;
  Tensor x = RandomTensor({100, 100}, 2);
  DropoutResult r = RunDropout(x, p, 1234);
  std::vector<float> xv = x.ToFloatVector();
  int kept = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    if (r.mask[i]) {
      ++kept;
      EXPECT_FLOAT_EQ(r.out[i], xv[i] / (1.0f - p)) << i;
    } else {
      EXPECT_EQ(r.out[i], 0.0f) << i;
    }
  }
  EXPECT_NEAR(kept / 10000.0, 1.0 - p, 0.02);
}

TEST(DropoutForward, IsTestAndZeroProbPassThrough) {
  Tensor x = RandomTensor({50}, 3);
  for (auto [p, is_test] :
       {std::pair<float, bool>{0.5f, true}, {0.0f, false}}) {
    DropoutResult r = RunDropout(x, p, 5, is_test);
    EXPECT_EQ(r.out, x.ToFloatVector());
    EXPECT_EQ(r.mask, std::vector<bool>(50, true));
  }
}

TEST(DropoutGrad, MatchesFiniteDifferences) {
  // The mask is a function of the seed, so it is the same in every run.
  GradCheckCase c;
  c.op = OpDescBuilder("dropout")
             .Input("X", "x")
             .Output("Out", "out")
             .Output("Mask", "mask")
             .Attr("dropout_prob", 0.3f)
             .Attr("seed", int64_t{42});
  c.inputs["x"] = RandomTensor({6, 8}, 4);
  c.check = {"x"};
  CheckGrad(c);
}

TEST(DropoutErrors, ProbabilityOutOfRange) {
  RegisterAllOps();
  for (float p : {1.0f, -0.1f, std::nanf("")}) {
    Program prog;
    SetMeta(TensorMeta{proto::FP32, {4}}, prog.global_block().AddVar("x"));
    auto op =
        AppendOpInferShapes(prog.global_block(), OpDescBuilder("dropout")
                                                     .Input("X", "x")
                                                     .Output("Out", "out")
                                                     .Output("Mask", "mask")
                                                     .Attr("dropout_prob", p));
    ASSERT_FALSE(op.ok());
    EXPECT_EQ(op.status().message(),
              StrCat("op 0 (dropout): attribute 'dropout_prob' is ", p, ", outside [0, 1)"));
  }
}

}  // namespace
}  // namespace loom
