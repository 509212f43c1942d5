// c_softmax_with_cross_entropy, the vocabulary-parallel cross entropy: on
// one rank it must be softmax_with_cross_entropy; its gradient is local, so
// shards of the global softmax must give the shards of the full gradient.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

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

proto::OpDesc CrossEntropyOp(int ignore_index = -100) {
  return OpDescBuilder("softmax_with_cross_entropy")
      .Input("Logits", "logits")
      .Input("Label", "label")
      .Output("Softmax", "softmax")
      // Not "loss": CheckGrad names its own scalar loss that.
      .Output("Loss", "xent")
      .Attr("ignore_index", ignore_index);
}

proto::OpDesc VocabParallelOp(int nranks, int rank, int ignore_index = -100) {
  return OpDescBuilder("c_softmax_with_cross_entropy")
      .Input("Logits", "logits")
      .Input("Label", "label")
      .Output("Softmax", "softmax")
      .Output("Loss", "xent")
      .Attr("ring_id", 1)
      .Attr("nranks", nranks)
      .Attr("rank", rank)
      .Attr("ignore_index", ignore_index);
}

proto::OpDesc CrossEntropyGradOp() {
  return OpDescBuilder("softmax_with_cross_entropy_grad")
      .Input("Softmax", "softmax")
      .Input("Label", "label")
      .Input("Loss@GRAD", "dloss")
      .Output("Logits@GRAD", "dlogits");
}

proto::OpDesc VocabParallelGradOp(int nranks, int rank,
                                  int ignore_index = -100) {
  return OpDescBuilder("c_softmax_with_cross_entropy_grad")
      .Input("Softmax", "softmax")
      .Input("Label", "label")
      .Input("Loss@GRAD", "dloss")
      .Output("Logits@GRAD", "dlogits")
      .Attr("nranks", nranks)
      .Attr("rank", rank)
      .Attr("ignore_index", ignore_index);
}

// Columns [begin, begin + n) of a [rows, cols] tensor.
Tensor Columns(const Tensor& t, int64_t begin, int64_t n) {
  const int64_t rows = t.dim(0), cols = t.dim(1);
  const std::vector<float> all = t.ToFloatVector();
  std::vector<float> part;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = begin; j < begin + n; ++j)
      part.push_back(all[r * cols + j]);
  }
  return MakeTensor({rows, n}, part);
}

// Two [rows, n] tensors side by side, as a [rows, 2n] vector.
std::vector<float> JoinColumns(const Tensor& a, const Tensor& b) {
  const int64_t rows = a.dim(0), n = a.dim(1);
  const std::vector<float> va = a.ToFloatVector(), vb = b.ToFloatVector();
  std::vector<float> out;
  for (int64_t r = 0; r < rows; ++r) {
    out.insert(out.end(), va.begin() + r * n, va.begin() + (r + 1) * n);
    out.insert(out.end(), vb.begin() + r * n, vb.begin() + (r + 1) * n);
  }
  return out;
}

// ---- one rank
// ----------------------------------------------------------------

TEST(VocabParallelCrossEntropyForward, OneRankEqualsSoftmaxWithCrossEntropy) {
  const std::map<std::string, Tensor> inputs = {
      {"logits", RandomTensor({4, 6}, 81, -3.0f, 3.0f)},
      {"label", MakeTensor({4}, std::vector<int64_t>{1, -100, 5, 0})}};
  auto full = RunOp(CrossEntropyOp(), inputs, {"softmax", "xent"});
  auto shard = RunOp(VocabParallelOp(1, 0), inputs, {"softmax", "xent"});
  EXPECT_EQ(shard.at("xent").shape(), (Shape{4}));
  EXPECT_EQ(shard.at("softmax").shape(), (Shape{4, 6}));
  EXPECT_EQ(shard.at("xent").ToFloatVector(), full.at("xent").ToFloatVector());
  EXPECT_EQ(shard.at("softmax").ToFloatVector(),
            full.at("softmax").ToFloatVector());
  EXPECT_EQ(shard.at("xent").ToFloatVector()[1], 0.0f);
}

TEST(VocabParallelCrossEntropyForward, OneRankThreeDimAndLargeLogits) {
  const std::map<std::string, Tensor> inputs = {
      {"logits",
       MakeTensor({2, 2, 3}, std::vector<float>{1000, 0, -5, 0, 1000, 2, 3, 3,
                                                3, -1, 0, 1})},
      {"label", MakeTensor({2, 2}, std::vector<int64_t>{1, 1, 2, 0})}};
  auto full = RunOp(CrossEntropyOp(2), inputs, {"softmax", "xent"});
  auto shard = RunOp(VocabParallelOp(1, 0, 2), inputs, {"softmax", "xent"});
  EXPECT_EQ(shard.at("xent").shape(), (Shape{2, 2}));
  EXPECT_EQ(shard.at("xent").ToFloatVector(), full.at("xent").ToFloatVector());
  EXPECT_EQ(shard.at("softmax").ToFloatVector(),
            full.at("softmax").ToFloatVector());
  std::vector<float> loss = shard.at("xent").ToFloatVector();
  EXPECT_NEAR(loss[0], 1000.0f, 1e-3f);
  EXPECT_NEAR(loss[1], 0.0f, 1e-3f);
  EXPECT_EQ(loss[2], 0.0f);  // ignore_index 2
}

TEST(VocabParallelCrossEntropyGrad, OneRankWithIgnoredRow) {
  GradCheckCase c;
  c.op = VocabParallelOp(1, 0);
  c.inputs["logits"] = RandomTensor({4, 6}, 82, -3.0f, 3.0f);
  c.inputs["label"] = MakeTensor({4}, std::vector<int64_t>{1, -100, 5, 0});
  c.check = {"logits"};
  c.outputs = {"xent"};
  CheckGrad(c);
}

TEST(VocabParallelCrossEntropyGrad, GradMakerCopiesAttributes) {
  RegisterAllOps();
  const OpSchema* fwd =
      OpRegistry::Global().Find("c_softmax_with_cross_entropy");
  ASSERT_NE(fwd, nullptr);
  EXPECT_TRUE(fwd->communication());
  EXPECT_FALSE(OpRegistry::Global()
                   .Find("c_softmax_with_cross_entropy_grad")
                   ->communication());
  auto grads = fwd->grad_maker()(VocabParallelOp(4, 3, 7));
  ASSERT_EQ(grads.size(), 1u);
  const proto::OpDesc& g = grads[0];
  EXPECT_EQ(g.type(), "c_softmax_with_cross_entropy_grad");
  EXPECT_EQ(SlotVars(g.inputs(), "Softmax"),
            (std::vector<std::string>{"softmax"}));
  EXPECT_EQ(SlotVars(g.inputs(), "Label"), (std::vector<std::string>{"label"}));
  EXPECT_EQ(SlotVars(g.inputs(), "Loss@GRAD"),
            (std::vector<std::string>{"xent@GRAD"}));
  EXPECT_EQ(SlotVars(g.outputs(), "Logits@GRAD"),
            (std::vector<std::string>{"logits@GRAD"}));
  EXPECT_EQ(AttrValue<int32_t>::Get(*FindAttrOrDefault(g, "ring_id")), 1);
  EXPECT_EQ(AttrValue<int32_t>::Get(*FindAttrOrDefault(g, "nranks")), 4);
  EXPECT_EQ(AttrValue<int32_t>::Get(*FindAttrOrDefault(g, "rank")), 3);
  EXPECT_EQ(AttrValue<int32_t>::Get(*FindAttrOrDefault(g, "ignore_index")), 7);
  Status schema = CheckOpSchema(g);
  EXPECT_TRUE(schema.ok()) << schema;
}

// ---- two ranks
// ---------------------------------------------------------------

TEST(VocabParallelCrossEntropyGrad, TwoRankShardsJoinToTheFullGradient) {
  // Row 0's label is in rank 0's shard, row 1's in rank 1's, row 2 is
  // ignored.
  const Tensor logits = RandomTensor({3, 6}, 83, -3.0f, 3.0f);
  const Tensor label = MakeTensor({3}, std::vector<int64_t>{1, 4, -100});
  const Tensor dloss = MakeTensor({3}, std::vector<float>{0.5f, 2.0f, 1.5f});
  const Tensor softmax = RunOne(
      CrossEntropyOp(), {{"logits", logits}, {"label", label}}, "softmax");
  const Tensor full = RunOne(
      CrossEntropyGradOp(),
      {{"softmax", softmax}, {"label", label}, {"dloss", dloss}}, "dlogits");
  Tensor shard[2];
  for (int rank = 0; rank < 2; ++rank) {
    shard[rank] = RunOne(VocabParallelGradOp(2, rank),
                         {{"softmax", Columns(softmax, 3 * rank, 3)},
                          {"label", label},
                          {"dloss", dloss}},
                         "dlogits");
    EXPECT_EQ(shard[rank].shape(), (Shape{3, 3}));
  }
  EXPECT_EQ(JoinColumns(shard[0], shard[1]), full.ToFloatVector());
  // The onehot lands in exactly one shard: rank 1 has none for row 0.
  EXPECT_EQ(shard[1].ToFloatVector()[0], 0.5f * softmax.ToFloatVector()[3]);
  // Ignored rows are exactly zero on every rank.
  for (int rank = 0; rank < 2; ++rank) {
    for (int j = 6; j < 9; ++j) EXPECT_EQ(shard[rank].ToFloatVector()[j], 0.0f);
  }
}

TEST(VocabParallelCrossEntropyGrad, LabelOutsideEveryShardIsAnError) {
  // Two ranks of 3 classes: labels must be in [0, 6).
  auto r = TryRunOne(VocabParallelGradOp(2, 1),
                     {{"softmax", RandomTensor({3, 3}, 84)},
                      {"label", MakeTensor({3}, std::vector<int64_t>{5, 0, 6})},
                      {"dloss", RandomTensor({3}, 85)}},
                     "dlogits");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "op 0 (c_softmax_with_cross_entropy_grad): Label[2] = 6 is out "
            "of range [0, 6)");
  r = TryRunOne(VocabParallelGradOp(2, 0),
                {{"softmax", RandomTensor({3, 3}, 84)},
                 {"label", MakeTensor({3}, std::vector<int64_t>{5, -1, 2})},
                 {"dloss", RandomTensor({3}, 85)}},
                "dlogits");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "op 0 (c_softmax_with_cross_entropy_grad): Label[1] = -1 is out "
            "of range [0, 6)");
}

TEST(VocabParallelCrossEntropyForward, OneRankLabelOutOfRange) {
  std::vector<int64_t> labels(8, 1);
  labels[5] = 300;
  auto r = TryRunOp(VocabParallelOp(1, 0),
                    {{"logits", RandomTensor({8, 256}, 86)},
                     {"label", MakeTensor({8}, labels)}},
                    {"xent"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "op 0 (c_softmax_with_cross_entropy): Label[5] = 300 is out of "
            "range [0, 256)");
}

TEST(VocabParallelCrossEntropyForward, SeveralRanksNeedACommunicator) {
  auto r =
      TryRunOp(VocabParallelOp(2, 1),
               {{"logits", RandomTensor({4, 3}, 87)},
                {"label", MakeTensor({4}, std::vector<int64_t>{0, 1, 4, 5})}},
               {"xent"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(r.status().message(),
            "op 0 (c_softmax_with_cross_entropy): c_softmax_with_cross_entropy "
            "over 2 ranks needs a communicator");
}

// ---- shape inference
// ---------------------------------------------------------

TEST(VocabParallelCrossEntropyShapes, ShardShapes) {
  RegisterAllOps();
  Program p;
  Block& b = p.global_block();
  SetMeta(TensorMeta{proto::FP32, {2, 5, 8}}, b.AddVar("logits"));
  SetMeta(TensorMeta{proto::INT64, {2, 5}}, b.AddVar("label"));
  auto op = AppendOpInferShapes(b, VocabParallelOp(4, 2));
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(MetaOf(*b.FindVar("softmax")),
            (TensorMeta{proto::FP32, {2, 5, 8}}));
  EXPECT_EQ(MetaOf(*b.FindVar("xent")), (TensorMeta{proto::FP32, {2, 5}}));
}

TEST(VocabParallelCrossEntropyShapes, Errors) {
  const TensorMeta logits{proto::FP32, {4, 6}};
  const TensorMeta label{proto::INT64, {4}};
  Status s = AppendStatus(
      VocabParallelOp(2, 0),
      {{"logits", logits}, {"label", TensorMeta{proto::INT64, {4, 1}}}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "op 0 (c_softmax_with_cross_entropy): Label is int64[4, 1] but "
            "Logits [4, 6] needs int64[4]");
  s = AppendStatus(
      VocabParallelOp(2, 0),
      {{"logits", TensorMeta{proto::INT64, {4, 6}}}, {"label", label}});
  EXPECT_EQ(s.message(),
            "op 0 (c_softmax_with_cross_entropy): Logits must be fp32 of rank "
            ">= 1, but is int64[4, 6]");
  s = AppendStatus(VocabParallelOp(0, 0),
                   {{"logits", logits}, {"label", label}});
  EXPECT_EQ(s.message(),
            "op 0 (c_softmax_with_cross_entropy): attribute nranks is 0, must "
            "be >= 1");
  s = AppendStatus(VocabParallelOp(2, 2),
                   {{"logits", logits}, {"label", label}});
  EXPECT_EQ(s.message(),
            "op 0 (c_softmax_with_cross_entropy): attribute rank 2 is out of "
            "range [0, 2) of attribute nranks");
  s = AppendStatus(VocabParallelOp(2, -1),
                   {{"logits", logits}, {"label", label}});
  EXPECT_EQ(s.message(),
            "op 0 (c_softmax_with_cross_entropy): attribute rank -1 is out of "
            "range [0, 2) of attribute nranks");
  s = AppendStatus(OpDescBuilder("c_softmax_with_cross_entropy")
                       .Input("Logits", "logits")
                       .Input("Label", "label")
                       .Output("Softmax", "softmax")
                       .Output("Loss", "xent")
                       .Attr("nranks", 2),
                   {{"logits", logits}, {"label", label}});
  EXPECT_EQ(s.message(),
            "op 0 (c_softmax_with_cross_entropy): missing required attribute "
            "'rank'");
}

TEST(VocabParallelCrossEntropyShapes, GradErrors) {
  const TensorMeta softmax{proto::FP32, {4, 3}};
  const TensorMeta label{proto::INT64, {4}};
  Status s = AppendStatus(VocabParallelGradOp(2, 1),
                          {{"softmax", softmax},
                           {"label", label},
                           {"dloss", TensorMeta{proto::FP32, {4}}}});
  EXPECT_TRUE(s.ok()) << s;
  s = AppendStatus(VocabParallelGradOp(2, 1),
                   {{"softmax", softmax},
                    {"label", label},
                    {"dloss", TensorMeta{proto::FP32, {4, 3}}}});
  EXPECT_EQ(s.message(),
            "op 0 (c_softmax_with_cross_entropy_grad): Loss@GRAD is "
            "fp32[4, 3] but Softmax [4, 3] needs fp32[4]");
  s = AppendStatus(VocabParallelGradOp(2, 1),
                   {{"softmax", softmax},
                    {"label", TensorMeta{proto::INT64, {3}}},
                    {"dloss", TensorMeta{proto::FP32, {4}}}});
  EXPECT_EQ(s.message(),
            "op 0 (c_softmax_with_cross_entropy_grad): Label is int64[3] but "
            "Softmax [4, 3] needs int64[4]");
  s = AppendStatus(VocabParallelGradOp(1, 1),
                   {{"softmax", softmax},
                    {"label", label},
                    {"dloss", TensorMeta{proto::FP32, {4}}}});
  EXPECT_EQ(s.message(),
            "op 0 (c_softmax_with_cross_entropy_grad): attribute rank 1 is "
            "out of range [0, 1) of attribute nranks");
}

}  // namespace
}  // namespace loom
