// Forward values, gradient checks and shape errors for reshape, transpose,
// slice, split and concat.
#include <gtest/gtest.h>

#include "executor/serial_executor.h"
#include "framework/autodiff.h"
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
using testing::AppendStatus;
using testing::TryRunOp;

// 0, 1, 2, ... as floats.
Tensor Iota(const Shape& shape) {
  std::vector<float> v(NumElements(shape));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return MakeTensor(shape, v);
}

// ---- reshape ----------------------------------------------------------------

TEST(ReshapeForward, ZeroCopiesAndMinusOneInfers) {
  Tensor out = RunOne(OpDescBuilder("reshape")
                          .Input("X", "x")
                          .Output("Out", "o")
                          .Attr("shape", std::vector<int64_t>{0, -1}),
                      {{"x", Iota({2, 3, 4})}}, "o");
  EXPECT_EQ(out.shape(), (Shape{2, 12}));
  EXPECT_EQ(out.ToFloatVector(), Iota({24}).ToFloatVector());
}

TEST(ReshapeGrad, ZeroAndMinusOne) {
  for (auto shape :
       {std::vector<int64_t>{0, -1}, std::vector<int64_t>{-1, 0, 2}}) {
    GradCheckCase c;
    c.op = OpDescBuilder("reshape")
               .Input("X", "x")
               .Output("Out", "out")
               .Attr("shape", shape);
    c.inputs["x"] = RandomTensor({2, 3, 4}, 11);
    c.check = {"x"};
    CheckGrad(c);
  }
}

TEST(ReshapeErrors, NameBothShapes) {
  const TensorMeta x{proto::FP32, {2, 3}};
  Status s = AppendStatus(OpDescBuilder("reshape")
                              .Input("X", "x")
                              .Output("Out", "o")
                              .Attr("shape", std::vector<int64_t>{4, 2}),
                          {{"x", x}});
  EXPECT_EQ(s.message(),
            "op 0 (reshape): cannot reshape X of shape [2, 3] (6 elements) to "
            "attribute shape [4, 2] (8 elements)");
  s = AppendStatus(OpDescBuilder("reshape")
                       .Input("X", "x")
                       .Output("Out", "o")
                       .Attr("shape", std::vector<int64_t>{4, -1}),
                   {{"x", x}});
  EXPECT_EQ(s.message(),
            "op 0 (reshape): cannot reshape X of shape [2, 3] (6 elements) to "
            "attribute shape [4, -1]: no size for the -1 makes 6 elements");
  s = AppendStatus(OpDescBuilder("reshape")
                       .Input("X", "x")
                       .Output("Out", "o")
                       .Attr("shape", std::vector<int64_t>{-1, -1}),
                   {{"x", x}});
  EXPECT_EQ(s.message(),
            "op 0 (reshape): attribute shape [-1, -1] has more than one -1");
  s = AppendStatus(OpDescBuilder("reshape")
                       .Input("X", "x")
                       .Output("Out", "o")
                       .Attr("shape", std::vector<int64_t>{3, 2, 0}),
                   {{"x", x}});
  EXPECT_EQ(s.message(),
            "op 0 (reshape): attribute shape [3, 2, 0] copies dim 2 of X, but "
            "X is [2, 3]");
}

// ---- transpose --------------------------------------------------------------

TEST(TransposeForward, Values) {
  Tensor two = RunOne(OpDescBuilder("transpose")
                          .Input("X", "x")
                          .Output("Out", "o")
                          .Attr("perm", std::vector<int32_t>{1, 0}),
                      {{"x", Iota({2, 3})}}, "o");
  EXPECT_EQ(two.shape(), (Shape{3, 2}));
  EXPECT_EQ(two.ToFloatVector(), (std::vector<float>{0, 3, 1, 4, 2, 5}));

  // x[i][j][k] = 12i + 4j + k; out[k][i][j] = x[i][j][k].
  Tensor three = RunOne(OpDescBuilder("transpose")
                            .Input("X", "x")
                            .Output("Out", "o")
                            .Attr("perm", std::vector<int32_t>{2, 0, 1}),
                        {{"x", Iota({2, 3, 4})}}, "o");
  ASSERT_EQ(three.shape(), (Shape{4, 2, 3}));
  std::vector<float> v = three.ToFloatVector();
  for (int k = 0; k < 4; ++k) {
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 3; ++j) {
        EXPECT_EQ(v[k * 6 + i * 3 + j], 12 * i + 4 * j + k);
      }
    }
  }
}

TEST(TransposeForward, Int64) {
  Tensor out = RunOne(
      OpDescBuilder("transpose")
          .Input("X", "x")
          .Output("Out", "o")
          .Attr("perm", std::vector<int32_t>{1, 0}),
      {{"x", MakeTensor({2, 2}, std::vector<int64_t>{1, 2, 3, 4})}}, "o");
  EXPECT_EQ(out.ToInt64Vector(), (std::vector<int64_t>{1, 3, 2, 4}));
}

TEST(TransposeGrad, ThreeDims) {
  GradCheckCase c;
  c.op = OpDescBuilder("transpose")
             .Input("X", "x")
             .Output("Out", "out")
             .Attr("perm", std::vector<int32_t>{1, 2, 0});
  c.inputs["x"] = RandomTensor({2, 3, 4}, 12);
  c.check = {"x"};
  CheckGrad(c);
}

TEST(TransposeGrad, MakerEmitsInversePerm) {
  RegisterAllOps();
  proto::OpDesc fwd = OpDescBuilder("transpose")
                          .Input("X", "x")
                          .Output("Out", "y")
                          .Attr("perm", std::vector<int32_t>{1, 2, 0});
  auto grads = OpRegistry::Global().Find("transpose")->grad_maker()(fwd);
  ASSERT_EQ(grads.size(), 1u);
  EXPECT_EQ(grads[0].type(), "transpose");
  EXPECT_EQ(SlotVars(grads[0].inputs(), "X"),
            (std::vector<std::string>{"y@GRAD"}));
  EXPECT_EQ(SlotVars(grads[0].outputs(), "Out"),
            (std::vector<std::string>{"x@GRAD"}));
  EXPECT_EQ(AttrValue<std::vector<int32_t>>::Get(
                *FindAttrOrDefault(grads[0], "perm")),
            (std::vector<int32_t>{2, 0, 1}));
}

TEST(TransposeErrors, NotAPermutation) {
  Status s = AppendStatus(OpDescBuilder("transpose")
                              .Input("X", "x")
                              .Output("Out", "o")
                              .Attr("perm", std::vector<int32_t>{0, 0, 1}),
                          {{"x", TensorMeta{proto::FP32, {2, 3, 4}}}});
  EXPECT_EQ(s.message(),
            "op 0 (transpose): attribute perm [0, 0, 1] is not a permutation "
            "of [0, 3) for X of shape [2, 3, 4]");
}

// ---- slice ------------------------------------------------------------------

proto::OpDesc Slice(std::vector<int32_t> axes, std::vector<int64_t> starts,
                    std::vector<int64_t> ends) {
  return OpDescBuilder("slice")
      .Input("X", "x")
      .Output("Out", "out")
      .Attr("axes", axes)
      .Attr("starts", starts)
      .Attr("ends", ends);
}

TEST(SliceForward, NegativeStartAndClampedEnd) {
  // x is 3 x 4: rows -2: -> rows 1, 2; cols 1:100 -> cols 1..3.
  Tensor out =
      RunOne(Slice({0, 1}, {-2, 1}, {100, 100}), {{"x", Iota({3, 4})}}, "out");
  EXPECT_EQ(out.shape(), (Shape{2, 3}));
  EXPECT_EQ(out.ToFloatVector(), (std::vector<float>{5, 6, 7, 9, 10, 11}));
  // Negative axis and negative end: the middle of the last dim.
  out = RunOne(Slice({-1}, {1}, {-1}), {{"x", Iota({3, 4})}}, "out");
  EXPECT_EQ(out.shape(), (Shape{3, 2}));
  EXPECT_EQ(out.ToFloatVector(), (std::vector<float>{1, 2, 5, 6, 9, 10}));
}

TEST(SliceGrad, TwoAxesNegativeStartClampedEnd) {
  GradCheckCase c;
  c.op = Slice({0, 2}, {-3, 1}, {100, -1});
  c.inputs["x"] = RandomTensor({4, 5, 6}, 13);
  c.check = {"x"};
  c.max_elements = 120;
  CheckGrad(c);
}

TEST(SliceErrors, RepeatedAxisAndLengths) {
  const std::map<std::string, TensorMeta> x{
      {"x", TensorMeta{proto::FP32, {3, 4}}}};
  EXPECT_EQ(AppendStatus(Slice({1, -1}, {0, 0}, {1, 1}), x).message(),
            "op 0 (slice): attribute axes names axis 1 twice");
  EXPECT_EQ(AppendStatus(Slice({0}, {0, 1}, {1}), x).message(),
            "op 0 (slice): attributes axes, starts and ends have lengths 1, 2 "
            "and 1; they must be equal");
  EXPECT_EQ(AppendStatus(Slice({2}, {0}, {1}), x).message(),
            "op 0 (slice): attribute axes: axis 2 is out of range for rank 2");
}

// ---- split / concat ---------------------------------------------------------

TEST(SplitConcatForward, RoundTrip) {
  Tensor x = Iota({2, 6});
  auto parts = RunOp(OpDescBuilder("split")
                         .Input("X", "x")
                         .Output("Out", std::vector<std::string>{"a", "b", "c"})
                         .Attr("axis", 1)
                         .Attr("sections", std::vector<int64_t>{1, -1, 2}),
                     {{"x", x}}, {"a", "b", "c"});
  EXPECT_EQ(parts["a"].shape(), (Shape{2, 1}));
  EXPECT_EQ(parts["b"].shape(), (Shape{2, 3}));
  EXPECT_EQ(parts["c"].shape(), (Shape{2, 2}));
  EXPECT_EQ(parts["a"].ToFloatVector(), (std::vector<float>{0, 6}));
  EXPECT_EQ(parts["b"].ToFloatVector(), (std::vector<float>{1, 2, 3, 7, 8, 9}));
  EXPECT_EQ(parts["c"].ToFloatVector(), (std::vector<float>{4, 5, 10, 11}));
  Tensor joined =
      RunOne(OpDescBuilder("concat")
                 .Input("X", std::vector<std::string>{"a", "b", "c"})
                 .Output("Out", "y")
                 .Attr("axis", -1),
             parts, "y");
  EXPECT_EQ(joined.shape(), x.shape());
  EXPECT_EQ(joined.ToFloatVector(), x.ToFloatVector());
}

TEST(SplitForward, EqualPartsAlongAxis0) {
  auto parts = RunOp(OpDescBuilder("split")
                         .Input("X", "x")
                         .Output("Out", std::vector<std::string>{"a", "b"})
                         .Attr("num", 2),
                     {{"x", Iota({4, 2})}}, {"a", "b"});
  EXPECT_EQ(parts["a"].ToFloatVector(), (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(parts["b"].ToFloatVector(), (std::vector<float>{4, 5, 6, 7}));
}

TEST(SplitGrad, NumAndSections) {
  GradCheckCase c;
  c.op = OpDescBuilder("split")
             .Input("X", "x")
             .Output("Out", std::vector<std::string>{"a", "b", "c"})
             .Attr("axis", 1)
             .Attr("num", 3);
  c.inputs["x"] = RandomTensor({2, 6, 2}, 14);
  c.check = {"x"};
  CheckGrad(c);

  c.op = OpDescBuilder("split")
             .Input("X", "x")
             .Output("Out", std::vector<std::string>{"a", "b"})
             .Attr("axis", -1)
             .Attr("sections", std::vector<int64_t>{-1, 3});
  c.inputs["x"] = RandomTensor({3, 5}, 15);
  CheckGrad(c);
}

TEST(SplitGrad, OnlyOneOutputFeedsTheLoss) {
  // b gets no gradient from the loss; autodiff must fill zeros for it.
  GradCheckCase c;
  c.op = OpDescBuilder("split")
             .Input("X", "x")
             .Output("Out", std::vector<std::string>{"a", "b"})
             .Attr("axis", 0)
             .Attr("sections", std::vector<int64_t>{1, 2});
  c.inputs["x"] = RandomTensor({3, 4}, 16);
  c.check = {"x"};
  c.outputs = {"a"};
  CheckGrad(c);
}

TEST(SplitGrad, MakerEmitsConcatAndZerosForUnusedPart) {
  RegisterAllOps();
  Program p;
  Block& b = p.global_block();
  auto* x = b.AddVar("x");
  SetMeta(TensorMeta{proto::FP32, {4, 3}}, x);
  x->set_is_parameter(true);
  x->set_persistable(true);
  ASSERT_TRUE(AppendOpInferShapes(
                  b, OpDescBuilder("split")
                         .Input("X", "x")
                         .Output("Out", std::vector<std::string>{"a", "b"})
                         .Attr("num", 2))
                  .ok());
  ASSERT_TRUE(AppendOpInferShapes(b, OpDescBuilder("reduce_sum")
                                         .Input("X", "a")
                                         .Output("Out", "loss")
                                         .Attr("reduce_all", true))
                  .ok());
  ASSERT_TRUE(AppendBackward(p, "loss").ok());
  std::vector<std::string> types;
  for (Op* op : b.ops()) types.push_back(op->type());
  // The zeros for b@GRAD come before the concat that reads them.
  EXPECT_EQ(types, (std::vector<std::string>{"split", "reduce_sum",
                                             "fill_constant", "reduce_sum_grad",
                                             "fill_constant", "concat"}));
  Op* concat = b.back();
  EXPECT_EQ(std::vector<std::string>(concat->Inputs("X").begin(),
                                     concat->Inputs("X").end()),
            (std::vector<std::string>{"a@GRAD", "b@GRAD"}));
  EXPECT_EQ(concat->Output("Out"), "x@GRAD");
}

TEST(SplitErrors, NumMustDivide) {
  Status s = AppendStatus(
      OpDescBuilder("split")
          .Input("X", "x")
          .Output("Out", std::vector<std::string>{"a", "b", "c", "d"})
          .Attr("axis", 1)
          .Attr("num", 4),
      {{"x", TensorMeta{proto::FP32, {2, 6}}}});
  EXPECT_EQ(
      s.message(),
      "op 0 (split): attribute num 4 does not divide dim 1 (6) of X [2, 6]");
  s = AppendStatus(OpDescBuilder("split")
                       .Input("X", "x")
                       .Output("Out", std::vector<std::string>{"a", "b"})
                       .Attr("sections", std::vector<int64_t>{1, 2}),
                   {{"x", TensorMeta{proto::FP32, {4}}}});
  EXPECT_EQ(s.message(),
            "op 0 (split): attribute sections [1, 2] does not add up to dim 0 "
            "(4) of X [4]");
  s = AppendStatus(OpDescBuilder("split")
                       .Input("X", "x")
                       .Output("Out", std::vector<std::string>{"a", "b"})
                       .Attr("num", 4),
                   {{"x", TensorMeta{proto::FP32, {4}}}});
  EXPECT_EQ(
      s.message(),
      "op 0 (split): output Out holds 2 vars but the split makes 4 parts");
}

TEST(ConcatGrad, ThreeInputsAxis1) {
  GradCheckCase c;
  c.op = OpDescBuilder("concat")
             .Input("X", std::vector<std::string>{"a", "b", "c"})
             .Output("Out", "out")
             .Attr("axis", 1);
  c.inputs["a"] = RandomTensor({2, 1, 3}, 17);
  c.inputs["b"] = RandomTensor({2, 4, 3}, 18);
  c.inputs["c"] = RandomTensor({2, 2, 3}, 19);
  c.check = {"a", "b", "c"};
  CheckGrad(c);
}

TEST(ConcatGrad, SomeInputsConstant) {
  // b is data: its X@GRAD entry is pruned and the kernel must skip it.
  GradCheckCase c;
  c.op = OpDescBuilder("concat")
             .Input("X", std::vector<std::string>{"a", "b", "c"})
             .Output("Out", "out")
             .Attr("axis", 1);
  c.inputs["a"] = RandomTensor({2, 1, 3}, 20);
  c.inputs["b"] = RandomTensor({2, 4, 3}, 21);
  c.inputs["c"] = RandomTensor({2, 2, 3}, 22);
  c.check = {"a", "c"};
  CheckGrad(c);
}

TEST(ConcatErrors, MismatchedDims) {
  Status s = AppendStatus(OpDescBuilder("concat")
                              .Input("X", std::vector<std::string>{"a", "b"})
                              .Output("Out", "o")
                              .Attr("axis", 1),
                          {{"a", TensorMeta{proto::FP32, {2, 3}}},
                           {"b", TensorMeta{proto::FP32, {3, 3}}}});
  EXPECT_EQ(s.message(),
            "op 0 (concat): X[1] is fp32[3, 3] but X[0] is fp32[2, 3]; they "
            "must agree except along axis 1");
}

}  // namespace
}  // namespace loom
