// Forward values and gradient checks for the elementwise, scale, sum, fill
// and reduce ops.
#include <cmath>

#include <gtest/gtest.h>

#include "executor/serial_executor.h"
#include "framework/op_builder.h"
#include "framework/shape_inference.h"
#include "unittests/grad_check.h"
#include "unittests/op_runner.h"

namespace loom {
namespace {

using testing::CheckGrad;
using testing::GradCheckCase;
using testing::RandomTensor;
using testing::RunOne;
using testing::RunOp;
using testing::TryRunOne;
using testing::TryRunOp;

GradCheckCase Binary(const std::string& type, const Shape& x, const Shape& y) {
  GradCheckCase c;
  c.op = OpDescBuilder(type).Input("X", "x").Input("Y", "y").Output("Out", "out");
  c.inputs["x"] = RandomTensor(x, 1);
  c.inputs["y"] = RandomTensor(y, 2);
  c.check = {"x", "y"};
  return c;
}

TEST(ElementwiseGrad, SameShape) {
  for (const char* type : {"elementwise_add", "elementwise_sub", "elementwise_mul"}) {
    SCOPED_TRACE(type);
    CheckGrad(Binary(type, {3, 4}, {3, 4}));
  }
}

TEST(ElementwiseGrad, BroadcastTrailing) {
  for (const char* type : {"elementwise_add", "elementwise_sub", "elementwise_mul"}) {
    SCOPED_TRACE(type);
    CheckGrad(Binary(type, {2, 3, 4}, {4}));
  }
}

TEST(ElementwiseGrad, BroadcastBothSides) {
  for (const char* type : {"elementwise_add", "elementwise_sub", "elementwise_mul"}) {
    SCOPED_TRACE(type);
    CheckGrad(Binary(type, {2, 1, 4}, {3, 1}));
  }
}

TEST(ElementwiseGrad, SameVarTwice) {
  // x * x: two contributions to x@GRAD, accumulated by a sum op.
  GradCheckCase c;
  c.op = OpDescBuilder("elementwise_mul").Input("X", "x").Input("Y", "x").Output("Out", "out");
  c.inputs["x"] = RandomTensor({5}, 3);
  c.check = {"x"};
  CheckGrad(c);
}

TEST(ScaleGrad, Matches) {
  GradCheckCase c;
  c.op = OpDescBuilder("scale").Input("X", "x").Output("Out", "out")
             .Attr("scale", -2.5f).Attr("bias", 0.75f);
  c.inputs["x"] = RandomTensor({2, 3}, 4);
  c.check = {"x"};
  CheckGrad(c);
}

TEST(SumGrad, Matches) {
  GradCheckCase c;
  c.op = OpDescBuilder("sum").Input("X", std::vector<std::string>{"a", "b", "c"})
             .Output("Out", "out");
  c.inputs["a"] = RandomTensor({4}, 5);
  c.inputs["b"] = RandomTensor({4}, 6);
  c.inputs["c"] = RandomTensor({4}, 7);
  c.check = {"a", "b", "c"};
  CheckGrad(c);
}

TEST(ReduceGrad, SumAndMeanOverDims) {
  for (const char* type : {"reduce_sum", "reduce_mean"}) {
    for (bool keep : {false, true}) {
      SCOPED_TRACE(std::string(type) + (keep ? " keep_dim" : ""));
      GradCheckCase c;
      c.op = OpDescBuilder(type).Input("X", "x").Output("Out", "out")
                 .Attr("dims", std::vector<int32_t>{0, -1})
                 .Attr("keep_dim", keep);
      c.inputs["x"] = RandomTensor({2, 3, 4}, 8);
      c.check = {"x"};
      CheckGrad(c);
    }
  }
}

TEST(ReduceGrad, All) {
  GradCheckCase c;
  c.op = OpDescBuilder("reduce_mean").Input("X", "x").Output("Out", "out")
             .Attr("reduce_all", true);
  c.inputs["x"] = RandomTensor({3, 5}, 9);
  c.check = {"x"};
  CheckGrad(c);
}


TEST(ElementwiseForward, BroadcastValues) {
  Tensor out = RunOne(
      OpDescBuilder("elementwise_sub").Input("X", "x").Input("Y", "y").Output("Out", "o"),
      {{"x", MakeTensor({2, 1}, std::vector<float>{10, 20})},
       {"y", MakeTensor({3}, std::vector<float>{1, 2, 3})}},
      "o");
  EXPECT_EQ(out.shape(), (Shape{2, 3}));
  EXPECT_EQ(out.ToFloatVector(), (std::vector<float>{9, 8, 7, 19, 18, 17}));
}

TEST(ElementwiseForward, IncompatibleShapesNameBoth) {
  RegisterAllOps();
  Program p;
  for (auto [name, shape] : {std::pair<const char*, Shape>{"x", {2, 3}}, {"y", {4}}}) {
    SetMeta(TensorMeta{proto::FP32, shape}, p.global_block().AddVar(name));
  }
  auto op = AppendOpInferShapes(
      p.global_block(),
      OpDescBuilder("elementwise_add").Input("X", "x").Input("Y", "y").Output("Out", "o"));
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.status().message(),
            "op 0 (elementwise_add): shapes [2, 3] and [4] do not broadcast");
}

TEST(ReduceForward, MeanOfRows) {
  Tensor out = RunOne(OpDescBuilder("reduce_mean").Input("X", "x").Output("Out", "o")
                          .Attr("dims", std::vector<int32_t>{1}),
                      {{"x", MakeTensor({2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6})}},
                      "o");
  EXPECT_EQ(out.shape(), (Shape{2}));
  EXPECT_EQ(out.ToFloatVector(), (std::vector<float>{2, 5}));
}

TEST(FillForward, ConstantAndSeededRandom) {
  Tensor c = RunOne(OpDescBuilder("fill_constant").Output("Out", "o")
                        .Attr("shape", std::vector<int64_t>{2, 2}).Attr("value", 1.5f),
                    {}, "o");
  EXPECT_EQ(c.ToFloatVector(), (std::vector<float>(4, 1.5f)));
  auto gauss = [](int64_t seed) {
    return RunOne(OpDescBuilder("gaussian_random").Output("Out", "o")
                      .Attr("shape", std::vector<int64_t>{1000})
                      .Attr("std", 2.0f).Attr("seed", seed),
                  {}, "o").ToFloatVector();
  };
  auto a = gauss(7), b = gauss(7), d = gauss(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, d);
  double sq = 0;
  for (float v : a) sq += v * v;
  EXPECT_NEAR(std::sqrt(sq / a.size()), 2.0, 0.2);
}

}  // namespace
}  // namespace loom
