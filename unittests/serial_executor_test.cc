// The serial executor: running, freeing temporaries, and its errors.
#include <gtest/gtest.h>

#include "executor/serial_executor.h"
#include "framework/op_builder.h"
#include "framework/shape_inference.h"

namespace loom {
namespace {

// y = 2 * (x + b), with b persistable.
Program Affine() {
  RegisterAllOps();
  Program p;
  Block& b = p.global_block();
  SetMeta(TensorMeta{proto::FP32, {2}}, b.AddVar("x"));
  b.FindVar("x")->set_is_data(true);
  SetMeta(TensorMeta{proto::FP32, {2}}, b.AddVar("b"));
  b.FindVar("b")->set_persistable(true);
  CHECK(AppendOpInferShapes(b, OpDescBuilder("elementwise_add").Input("X", "x")
                                   .Input("Y", "b").Output("Out", "t")).ok());
  CHECK(AppendOpInferShapes(b, OpDescBuilder("scale").Input("X", "t")
                                   .Output("Out", "y").Attr("scale", 2.0f)).ok());
  return p;
}

TEST(SerialExecutor, RunsAndFreesTemporariesAfterLastUse) {
  Program p = Affine();
  Scope scope;
  scope.Var("x")->CopyFrom(MakeTensor({2}, std::vector<float>{1, 2}));
  scope.Var("b")->CopyFrom(MakeTensor({2}, std::vector<float>{10, 20}));
  auto exec = SerialExecutor::Create(p, &scope, {{"y"}});
  ASSERT_TRUE(exec.ok()) << exec.status();
  ASSERT_TRUE((*exec)->Run().ok());
  EXPECT_EQ(scope.Find("y")->ToFloatVector(), (std::vector<float>{22, 44}));
  EXPECT_FALSE(scope.Find("t")->initialized());  // temporary, freed
  EXPECT_TRUE(scope.Find("b")->initialized());   // persistable, kept
  EXPECT_TRUE(scope.Find("x")->initialized());   // data, kept
  // A second run reuses the prepared instructions.
  scope.Var("x")->CopyFrom(MakeTensor({2}, std::vector<float>{0, 0}));
  ASSERT_TRUE((*exec)->Run().ok());
  EXPECT_EQ(scope.Find("y")->ToFloatVector(), (std::vector<float>{20, 40}));
}

TEST(SerialExecutor, ErrorsNameTheVar) {
  Program p = Affine();
  Scope scope;
  auto exec = SerialExecutor::Create(p, &scope);
  ASSERT_TRUE(exec.ok());
  EXPECT_EQ((*exec)->Run().message(), "data var 'x' was not fed");
  scope.Var("x")->CopyFrom(MakeTensor({3}, std::vector<float>{1, 2, 3}));
  EXPECT_EQ((*exec)->Run().message(),
            "var 'x' holds fp32[3] but the program declares fp32[2]");
  scope.Var("x")->CopyFrom(MakeTensor({2}, std::vector<float>{1, 2}));
  EXPECT_EQ((*exec)->Run().message(),
            "persistable var 'b' is not initialized (run the startup program first)");
}

TEST(SerialExecutor, UnknownOpIsRejectedAtCreate) {
  Program p = Affine();
  proto::OpDesc bogus = OpDescBuilder("frobnicate").Input("X", "y").Output("Out", "z");
  p.global_block().AppendOp(bogus);
  Scope scope;
  auto exec = SerialExecutor::Create(p, &scope);
  ASSERT_FALSE(exec.ok());
  EXPECT_EQ(exec.status().message(),
            "block 0, op 2 (frobnicate): unknown op type 'frobnicate'");
}

TEST(SerialExecutor, ParentScopeSharesPersistables) {
  Program p = Affine();
  Scope step;
  step.Var("b")->CopyFrom(MakeTensor({2}, std::vector<float>{1, 1}));
  Scope micro(&step);
  micro.Var("x")->CopyFrom(MakeTensor({2}, std::vector<float>{1, 2}));
  auto exec = SerialExecutor::Create(p, &micro, {{"y"}});
  ASSERT_TRUE(exec.ok());
  ASSERT_TRUE((*exec)->Run().ok());
  EXPECT_EQ(micro.FindLocal("b"), nullptr);
  EXPECT_EQ(micro.Find("y")->ToFloatVector(), (std::vector<float>{4, 6}));
}

}  // namespace
}  // namespace loom
