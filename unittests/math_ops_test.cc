// Forward values, gradient checks and error messages for matmul, gelu, relu,
// layer_norm, softmax and softmax_with_cross_entropy.
#include <cmath>
#include <map>
#include <string>
#include <vector>

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
using testing::AppendStatus;
using testing::TryRunOp;
using testing::RandomTensorAwayFromZero;

// ---- Helpers ---------------------------------------------------------------

TensorMeta F32(const Shape& s) { return TensorMeta{proto::FP32, s}; }

void ExpectAllNear(const std::vector<float>& actual,
                   const std::vector<float>& expected, float tol) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], tol) << "element " << i;
  }
}

// ---- matmul ----------------------------------------------------------------

proto::OpDesc MatmulOp(bool tx, bool ty, float alpha) {
  return OpDescBuilder("matmul")
      .Input("X", "x")
      .Input("Y", "y")
      .Output("Out", "out")
      .Attr("transpose_x", tx)
      .Attr("transpose_y", ty)
      .Attr("alpha", alpha);
}

// The stored shape of an operand whose logical matrix is [rows, cols].
Shape Stored(Shape batch, int64_t rows, int64_t cols, bool transposed) {
  batch.push_back(transposed ? cols : rows);
  batch.push_back(transposed ? rows : cols);
  return batch;
}

GradCheckCase MatmulCase(const Shape& xbatch, const Shape& ybatch, int64_t m,
                         int64_t k, int64_t n, bool tx, bool ty,
                         float alpha = 1.0f) {
  GradCheckCase c;
  c.op = MatmulOp(tx, ty, alpha);
  c.inputs["x"] = RandomTensor(Stored(xbatch, m, k, tx), 11);
  c.inputs["y"] = RandomTensor(Stored(ybatch, k, n, ty), 12);
  c.check = {"x", "y"};
  return c;
}

std::string ComboName(bool tx, bool ty) {
  return std::string("transpose_x=") + (tx ? "1" : "0") +
         " transpose_y=" + (ty ? "1" : "0");
}

TEST(MatmulGrad, TwoDimAllTransposeCombos) {
  for (bool tx : {false, true}) {
    for (bool ty : {false, true}) {
      SCOPED_TRACE(ComboName(tx, ty));
      CheckGrad(MatmulCase({}, {}, 3, 4, 5, tx, ty));
    }
  }
}

TEST(MatmulGrad, Batched3DWith2DAllTransposeCombos) {
  for (bool tx : {false, true}) {
    for (bool ty : {false, true}) {
      SCOPED_TRACE(ComboName(tx, ty));
      CheckGrad(MatmulCase({2}, {}, 3, 4, 5, tx, ty));
    }
  }
}

TEST(MatmulGrad, Batched3DWith3DAllTransposeCombos) {
  for (bool tx : {false, true}) {
    for (bool ty : {false, true}) {
      SCOPED_TRACE(ComboName(tx, ty));
      CheckGrad(MatmulCase({2}, {2}, 3, 4, 2, tx, ty));
    }
  }
}

TEST(MatmulGrad, Batched4D) {
  CheckGrad(MatmulCase({2, 2}, {2, 2}, 2, 3, 4, false, true));
  CheckGrad(MatmulCase({2, 2}, {}, 2, 3, 4, true, false));
}

TEST(MatmulGrad, Alpha) {
  CheckGrad(MatmulCase({}, {}, 3, 4, 5, false, false, -0.5f));
  CheckGrad(MatmulCase({2}, {}, 3, 4, 5, true, true, 2.5f));
  CheckGrad(MatmulCase({2}, {2}, 3, 4, 5, false, true, 0.125f));
}

TEST(MatmulGrad, OneSideOnly) {
  // The other input is constant data, so its gradient output is pruned and
  // the kernel must skip it.
  GradCheckCase cx = MatmulCase({2}, {}, 3, 4, 5, true, false);
  cx.check = {"x"};
  CheckGrad(cx);
  GradCheckCase cy = MatmulCase({2}, {}, 3, 4, 5, false, true);
  cy.check = {"y"};
  CheckGrad(cy);
}

TEST(MatmulForward, TwoByTwo) {
  Tensor out = RunOne(MatmulOp(false, false, 1.0f),
                      {{"x", MakeTensor({2, 2}, std::vector<float>{1, 2, 3, 4})},
                       {"y", MakeTensor({2, 2}, std::vector<float>{5, 6, 7, 8})}},
                      "out");
  EXPECT_EQ(out.shape(), (Shape{2, 2}));
  EXPECT_EQ(out.ToFloatVector(), (std::vector<float>{19, 22, 43, 50}));
}

TEST(MatmulForward, TransposedOperandsAndAlpha) {
  // X^T @ Y^T * 2 with X = [[1, 3], [2, 4]] and Y = [[5, 7], [6, 8]] stored
  // transposed is 2 * [[1, 2], [3, 4]] @ [[5, 6], [7, 8]].
  Tensor out = RunOne(MatmulOp(true, true, 2.0f),
                      {{"x", MakeTensor({2, 2}, std::vector<float>{1, 3, 2, 4})},
                       {"y", MakeTensor({2, 2}, std::vector<float>{5, 7, 6, 8})}},
                      "out");
  EXPECT_EQ(out.ToFloatVector(), (std::vector<float>{38, 44, 86, 100}));
}

// alpha * op(X) @ op(Y) by the definition, batch by batch.
std::vector<float> NaiveMatmul(const Tensor& x, const Tensor& y, bool tx,
                               bool ty, float alpha) {
  const Shape& xs = x.shape();
  const Shape& ys = y.shape();
  const int64_t m = tx ? xs.back() : xs[xs.size() - 2];
  const int64_t k = tx ? xs[xs.size() - 2] : xs.back();
  const int64_t n = ty ? ys[ys.size() - 2] : ys.back();
  const int64_t batch = x.numel() / (m * k);
  const bool y_batched = ys.size() > 2;
  auto xv = x.ToFloatVector();
  auto yv = y.ToFloatVector();
  std::vector<float> out(batch * m * n);
  for (int64_t b = 0; b < batch; ++b) {
    const float* xb = xv.data() + b * m * k;
    const float* yb = yv.data() + (y_batched ? b * k * n : 0);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          const float a = tx ? xb[p * m + i] : xb[i * k + p];
          const float c = ty ? yb[j * k + p] : yb[p * n + j];
          acc += double{a} * c;
        }
        out[(b * m + i) * n + j] = static_cast<float>(alpha * acc);
      }
    }
  }
  return out;
}

TEST(MatmulForward, MatchesNaiveReference) {
  struct Batches {
    Shape x, y;
  };
  for (const Batches& b : {Batches{{}, {}}, Batches{{3}, {}}, Batches{{3}, {3}},
                           Batches{{2, 3}, {}}, Batches{{2, 3}, {2, 3}}}) {
    for (bool tx : {false, true}) {
      for (bool ty : {false, true}) {
        SCOPED_TRACE(ShapeToString(b.x) + " @ " + ShapeToString(b.y) + " " +
                     ComboName(tx, ty));
        Tensor x = RandomTensor(Stored(b.x, 5, 7, tx), 21);
        Tensor y = RandomTensor(Stored(b.y, 7, 6, ty), 22);
        Tensor out =
            RunOne(MatmulOp(tx, ty, 0.75f), {{"x", x}, {"y", y}}, "out");
        Shape want = b.x;
        want.push_back(5);
        want.push_back(6);
        EXPECT_EQ(out.shape(), want);
        ExpectAllNear(out.ToFloatVector(), NaiveMatmul(x, y, tx, ty, 0.75f),
                      1e-5f);
      }
    }
  }
}

TEST(MatmulForward, ShapeMismatchNamesShapes) {
  Status s = AppendStatus(MatmulOp(false, false, 1.0f),
                          {{"x", F32({2, 3})}, {"y", F32({4, 5})}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "op 0 (matmul): X has 3 columns (after transpose) but Y has 4 "
            "rows: [2, 3] @ [4, 5]");
  // With transpose_y the same Y fits a [2, 5] X.
  EXPECT_TRUE(AppendStatus(MatmulOp(false, true, 1.0f),
                           {{"x", F32({2, 5})}, {"y", F32({4, 5})}})
                  .ok());
}

TEST(MatmulForward, BatchMismatchAndRankErrors) {
  Status s = AppendStatus(MatmulOp(false, false, 1.0f),
                          {{"x", F32({2, 3, 4})}, {"y", F32({3, 4, 5})}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("[2, 3, 4] @ [3, 4, 5]"), std::string::npos)
      << s;
  Status r = AppendStatus(MatmulOp(false, false, 1.0f),
                          {{"x", F32({4})}, {"y", F32({4, 5})}});
  EXPECT_EQ(r.message(), "op 0 (matmul): X must have rank >= 2, but has shape [4]");
}

// ---- gelu and relu ---------------------------------------------------------

TEST(GeluGrad, ExactAndTanh) {
  for (bool approximate : {false, true}) {
    SCOPED_TRACE(approximate ? "tanh" : "erf");
    GradCheckCase c;
    c.op = OpDescBuilder("gelu").Input("X", "x").Output("Out", "out")
               .Attr("approximate", approximate);
    c.inputs["x"] = RandomTensor({3, 8}, 31, -3.0f, 3.0f);
    c.check = {"x"};
    CheckGrad(c);
  }
}

TEST(GeluForward, KnownValues) {
  Tensor x = MakeTensor({4}, std::vector<float>{1.0f, -1.0f, 2.0f, -0.5f});
  auto gelu = [&](bool approximate) {
    return RunOne(OpDescBuilder("gelu").Input("X", "x").Output("Out", "out")
                      .Attr("approximate", approximate),
                  {{"x", x}}, "out")
        .ToFloatVector();
  };
  // From 0.5 x (1 + erf(x / sqrt 2)) and its tanh form, in double.
  ExpectAllNear(gelu(false), {0.84134475f, -0.15865525f, 1.95449974f, -0.15426877f},
                1e-6f);
  ExpectAllNear(gelu(true), {0.84119199f, -0.15880801f, 1.95459769f, -0.15428599f},
                1e-6f);
}

TEST(ReluGrad, AwayFromZero) {
  GradCheckCase c;
  c.op = OpDescBuilder("relu").Input("X", "x").Output("Out", "out");
  // |x| >= 0.1 keeps x +- eps on one side of the kink.
  c.inputs["x"] = RandomTensorAwayFromZero({4, 6}, 41, 0.1f);
  c.check = {"x"};
  CheckGrad(c);
}

TEST(ReluForward, Values) {
  Tensor out = RunOne(OpDescBuilder("relu").Input("X", "x").Output("Out", "out"),
                      {{"x", MakeTensor({4}, std::vector<float>{-2, 0, 0.5f, 3})}},
                      "out");
  EXPECT_EQ(out.ToFloatVector(), (std::vector<float>{0, 0, 0.5f, 3}));
}

// ---- layer_norm ------------------------------------------------------------

GradCheckCase LayerNormCase(const Shape& x, int axis, bool scale, bool bias) {
  GradCheckCase c;
  OpDescBuilder b("layer_norm");
  b.Input("X", "x")
      .Output("Y", "y")
      .Output("Mean", "mean")
      .Output("Variance", "var")
      .Attr("begin_norm_axis", axis);
  const int rank = static_cast<int>(x.size());
  const int a = axis < 0 ? axis + rank : axis;
  const int64_t h = NumElements(Shape(x.begin() + a, x.end()));
  c.inputs["x"] = RandomTensor(x, 51, -2.0f, 2.0f);
  c.check = {"x"};
  if (scale) {
    b.Input("Scale", "scale");
    c.inputs["scale"] = RandomTensor({h}, 52, 0.5f, 1.5f);
    c.check.push_back("scale");
  }
  if (bias) {
    b.Input("Bias", "bias");
    c.inputs["bias"] = RandomTensor({h}, 53);
    c.check.push_back("bias");
  }
  c.op = b.Build();
  // Mean and Variance are saved statistics no gradient flows through.
  c.outputs = {"y"};
  return c;
}

TEST(LayerNormGrad, LastDim) {
  CheckGrad(LayerNormCase({3, 5}, -1, true, true));
  CheckGrad(LayerNormCase({2, 3, 6}, 2, true, true));
}

TEST(LayerNormGrad, LastTwoDims) {
  CheckGrad(LayerNormCase({2, 3, 4}, -2, true, true));
  CheckGrad(LayerNormCase({2, 3, 4}, 1, false, false));
}

TEST(LayerNormGrad, WithoutScaleOrBias) {
  CheckGrad(LayerNormCase({4, 5}, -1, false, false));
  CheckGrad(LayerNormCase({4, 5}, -1, true, false));
  CheckGrad(LayerNormCase({4, 5}, -1, false, true));
}

TEST(LayerNormGrad, OnlyScaleAndBias) {
  // X is constant: X@GRAD is pruned.
  GradCheckCase c = LayerNormCase({6, 4}, -1, true, true);
  c.check = {"scale", "bias"};
  CheckGrad(c);
}

proto::OpDesc LayerNormOp(bool affine) {
  OpDescBuilder b("layer_norm");
  b.Input("X", "x")
      .Output("Y", "y")
      .Output("Mean", "mean")
      .Output("Variance", "var");
  if (affine) b.Input("Scale", "scale").Input("Bias", "bias");
  return b.Build();
}

TEST(LayerNormForward, Values) {
  auto r = TryRunOp(LayerNormOp(true),
                 {{"x", MakeTensor({2, 4}, std::vector<float>{1, 2, 3, 4, 2, 2, 2, 2})},
                  {"scale", MakeTensor({4}, std::vector<float>{1, 2, 1, 1})},
                  {"bias", MakeTensor({4}, std::vector<float>{0, 0, 0, 10})}},
                 {"y", "mean", "var"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->at("mean").shape(), (Shape{2}));
  ExpectAllNear(r->at("mean").ToFloatVector(), {2.5f, 2.0f}, 1e-6f);
  // Biased variance: mean of squared deviations.
  ExpectAllNear(r->at("var").ToFloatVector(), {1.25f, 0.0f}, 1e-6f);
  const float s = 1.0f / std::sqrt(1.25f + 1e-5f);
  ExpectAllNear(r->at("y").ToFloatVector(),
                {-1.5f * s, -0.5f * s * 2, 0.5f * s, 1.5f * s + 10,
                 // A constant row normalizes to 0, leaving the bias.
                 0, 0, 0, 10},
                1e-5f);
}

TEST(LayerNormForward, LargeOffsetKeepsPrecision) {
  // Values 1e4 + {0, 1}: a float one-pass variance would lose them.
  auto r = TryRunOp(LayerNormOp(false),
                 {{"x", MakeTensor({1, 2}, std::vector<float>{10000.0f, 10001.0f})}},
                 {"y", "var"});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectAllNear(r->at("var").ToFloatVector(), {0.25f}, 1e-6f);
  ExpectAllNear(r->at("y").ToFloatVector(), {-1.0f, 1.0f}, 1e-4f);
}

TEST(LayerNormForward, ScaleShapeErrorNamesShapes) {
  Status s = AppendStatus(OpDescBuilder("layer_norm")
                              .Input("X", "x")
                              .Input("Scale", "scale")
                              .Output("Y", "y")
                              .Output("Mean", "mean")
                              .Output("Variance", "var")
                              .Attr("begin_norm_axis", 1),
                          {{"x", F32({2, 3, 4})}, {"scale", F32({4})}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "op 0 (layer_norm): Scale is fp32[4] but normalizing over "
            "[3, 4] needs fp32[12]");
}

// ---- softmax ---------------------------------------------------------------

GradCheckCase SoftmaxCase(const Shape& x, int axis, bool causal) {
  GradCheckCase c;
  c.op = OpDescBuilder("softmax").Input("X", "x").Output("Out", "out")
             .Attr("axis", axis).Attr("causal", causal);
  c.inputs["x"] = RandomTensor(x, 61, -2.0f, 2.0f);
  c.check = {"x"};
  return c;
}

TEST(SoftmaxGrad, LastAxis) { CheckGrad(SoftmaxCase({3, 5}, -1, false)); }

TEST(SoftmaxGrad, Axis0) { CheckGrad(SoftmaxCase({4, 3}, 0, false)); }

TEST(SoftmaxGrad, MiddleAxis) { CheckGrad(SoftmaxCase({2, 4, 3}, 1, false)); }

TEST(SoftmaxGrad, Causal) {
  CheckGrad(SoftmaxCase({2, 4, 4}, -1, true));
  // Sq < Sk: query q sees keys up to q + 2.
  CheckGrad(SoftmaxCase({3, 5}, 1, true));
}

proto::OpDesc SoftmaxOp(int axis, bool causal) {
  return OpDescBuilder("softmax").Input("X", "x").Output("Out", "out")
      .Attr("axis", axis).Attr("causal", causal);
}

TEST(SoftmaxForward, StableOnLargeLogits) {
  Tensor out = RunOne(SoftmaxOp(-1, false),
                      {{"x", MakeTensor({2, 2}, std::vector<float>{1000, 1001, -1000, -1000})}},
                      "out");
  const float e = std::exp(1.0f);
  ExpectAllNear(out.ToFloatVector(), {1 / (1 + e), e / (1 + e), 0.5f, 0.5f},
                1e-6f);
}

TEST(SoftmaxForward, Axis0ColumnsSumToOne) {
  Tensor x = RandomTensor({3, 4}, 62);
  auto out = RunOne(SoftmaxOp(0, false), {{"x", x}}, "out").ToFloatVector();
  auto xv = x.ToFloatVector();
  for (int j = 0; j < 4; ++j) {
    double z = 0;
    for (int i = 0; i < 3; ++i) z += std::exp(double{xv[i * 4 + j]});
    for (int i = 0; i < 3; ++i) {
      EXPECT_NEAR(out[i * 4 + j], std::exp(xv[i * 4 + j]) / z, 1e-6)
          << i << "," << j;
    }
  }
}

TEST(SoftmaxForward, CausalZerosAboveDiagonal) {
  struct Case {
    int64_t sq, sk;
  };
  for (const Case& c : {Case{4, 4}, Case{3, 5}}) {
    SCOPED_TRACE(StrCat(c.sq, "x", c.sk));
    Tensor x = RandomTensor({2, c.sq, c.sk}, 63, -3.0f, 3.0f);
    auto out = RunOne(SoftmaxOp(-1, true), {{"x", x}}, "out").ToFloatVector();
    auto xv = x.ToFloatVector();
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t q = 0; q < c.sq; ++q) {
        const int64_t row = (b * c.sq + q) * c.sk;
        const int64_t last = q + (c.sk - c.sq);  // last visible key
        double z = 0, total = 0;
        for (int64_t k = 0; k <= last; ++k) z += std::exp(double{xv[row + k]});
        for (int64_t k = 0; k < c.sk; ++k) {
          if (k > last) {
            EXPECT_EQ(out[row + k], 0.0f) << "q=" << q << " k=" << k;
          } else {
            EXPECT_NEAR(out[row + k], std::exp(xv[row + k]) / z, 1e-6)
                << "q=" << q << " k=" << k;
          }
          total += out[row + k];
        }
        EXPECT_NEAR(total, 1.0, 1e-6) << "q=" << q;
      }
    }
  }
}

TEST(SoftmaxForward, CausalNeedsLastAxisAndSqAtMostSk) {
  Status axis = AppendStatus(SoftmaxOp(0, true), {{"x", F32({4, 4})}});
  EXPECT_EQ(axis.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(axis.message(),
            "op 0 (softmax): causal softmax needs X of rank >= 2 and axis the "
            "last dim, but X is [4, 4] and axis is 0");
  Status shape = AppendStatus(SoftmaxOp(-1, true), {{"x", F32({5, 3})}});
  EXPECT_EQ(shape.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(shape.message().find("[5, 3]"), std::string::npos) << shape;
}

// ---- softmax_with_cross_entropy ---------------------------------------------

proto::OpDesc CrossEntropyOp(int ignore_index = -100) {
  return OpDescBuilder("softmax_with_cross_entropy")
      .Input("Logits", "logits")
      .Input("Label", "label")
      .Output("Softmax", "softmax")
      // Not "loss": CheckGrad names its own scalar loss that.
      .Output("Loss", "xent")
      .Attr("ignore_index", ignore_index);
}

TEST(CrossEntropyGrad, WithIgnoredRow) {
  GradCheckCase c;
  c.op = CrossEntropyOp();
  c.inputs["logits"] = RandomTensor({4, 6}, 71, -3.0f, 3.0f);
  c.inputs["label"] = MakeTensor({4}, std::vector<int64_t>{1, -100, 5, 0});
  c.check = {"logits"};
  c.outputs = {"xent"};
  CheckGrad(c);
}

TEST(CrossEntropyGrad, ThreeDimLogitsCustomIgnoreIndex) {
  GradCheckCase c;
  c.op = CrossEntropyOp(3);
  c.inputs["logits"] = RandomTensor({2, 3, 5}, 72, -3.0f, 3.0f);
  c.inputs["label"] =
      MakeTensor({2, 3}, std::vector<int64_t>{0, 3, 4, 2, 1, 3});
  c.check = {"logits"};
  c.outputs = {"xent"};
  CheckGrad(c);
}

TEST(CrossEntropyGrad, IgnoredRowGetsExactlyZero) {
  Tensor g = RunOne(
      OpDescBuilder("softmax_with_cross_entropy_grad")
          .Input("Softmax", "softmax")
          .Input("Label", "label")
          .Input("Loss@GRAD", "dloss")
          .Output("Logits@GRAD", "dlogits"),
      {{"softmax", MakeTensor({2, 2}, std::vector<float>{0.25f, 0.75f, 0.5f, 0.5f})},
       {"label", MakeTensor({2}, std::vector<int64_t>{1, -100})},
       {"dloss", MakeTensor({2}, std::vector<float>{2, 2})}},
      "dlogits");
  EXPECT_EQ(g.ToFloatVector(), (std::vector<float>{0.5f, -0.5f, 0, 0}));
}

TEST(CrossEntropyForward, UniformRowIsLogV) {
  auto r = TryRunOp(CrossEntropyOp(),
                 {{"logits", MakeTensor({2, 256}, std::vector<float>(512, 0.25f))},
                  {"label", MakeTensor({2}, std::vector<int64_t>{7, -100})}},
                 {"xent", "softmax"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->at("xent").shape(), (Shape{2}));
  ExpectAllNear(r->at("xent").ToFloatVector(), {std::log(256.0f), 0.0f}, 1e-5f);
  for (float p : r->at("softmax").ToFloatVector()) {
    ASSERT_NEAR(p, 1.0f / 256, 1e-8f);
  }
}

TEST(CrossEntropyForward, LargeLogitsAreStable) {
  Tensor loss = RunOne(
      CrossEntropyOp(),
      {{"logits", MakeTensor({2, 2}, std::vector<float>{1000, 0, 0, 1000})},
       {"label", MakeTensor({2}, std::vector<int64_t>{1, 1})}},
      "xent");
  ExpectAllNear(loss.ToFloatVector(), {1000.0f, 0.0f}, 1e-3f);
}

TEST(CrossEntropyForward, OutOfRangeLabelNamesPositionAndValue) {
  std::vector<int64_t> labels(8, 1);
  labels[5] = 300;
  auto r = TryRunOp(CrossEntropyOp(),
                 {{"logits", RandomTensor({8, 256}, 73)},
                  {"label", MakeTensor({8}, labels)}},
                 {"xent"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "op 0 (softmax_with_cross_entropy): Label[5] = 300 is out of range "
            "[0, 256)");
  labels[5] = -1;  // negative, and not ignore_index
  auto neg = TryRunOp(CrossEntropyOp(),
                   {{"logits", RandomTensor({8, 256}, 73)},
                    {"label", MakeTensor({8}, labels)}},
                   {"xent"});
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.status().message().find("Label[5] = -1 is out of range"),
            std::string::npos)
      << neg.status();
}

TEST(CrossEntropyForward, LabelShapeError) {
  Status s = AppendStatus(CrossEntropyOp(),
                          {{"logits", F32({4, 6})},
                           {"label", TensorMeta{proto::INT64, {4, 1}}}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "op 0 (softmax_with_cross_entropy): Label is int64[4, 1] but "
            "Logits [4, 6] needs int64[4]");
}

}  // namespace
}  // namespace loom
