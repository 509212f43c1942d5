// lookup_table: forward rows, padding, the dense gradient and id errors, and
// the vocabulary-sharded mode (start_index >= 0).
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

proto::OpDesc Lookup(int64_t padding_idx = -1) {
  return OpDescBuilder("lookup_table")
      .Input("W", "w")
      .Input("Ids", "ids")
      .Output("Out", "out")
      .Attr("padding_idx", padding_idx);
}

// A lookup into the shard of a table that starts at global row `start`.
proto::OpDesc ShardLookup(int64_t start, int64_t padding_idx = -1) {
  return OpDescBuilder("lookup_table")
      .Input("W", "w")
      .Input("Ids", "ids")
      .Output("Out", "out")
      .Attr("padding_idx", padding_idx)
      .Attr("start_index", start);
}

// Row r of the 4 x 2 table is {10r, 10r + 1}.
Tensor Table() {
  return MakeTensor({4, 2}, std::vector<float>{0, 1, 10, 11, 20, 21, 30, 31});
}

TEST(LookupTableForward, RowsInIdsShape) {
  auto out =
      TryRunOne(Lookup(),
             {{"w", Table()},
              {"ids", MakeTensor({2, 2}, std::vector<int64_t>{3, 0, 1, 3})}},
             "out");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(out->ToFloatVector(),
            (std::vector<float>{30, 31, 0, 1, 10, 11, 30, 31}));
}

TEST(LookupTableForward, PaddingRowsAreZero) {
  auto out = TryRunOne(
      Lookup(2),
      {{"w", Table()}, {"ids", MakeTensor({3}, std::vector<int64_t>{2, 1, 2})}},
      "out");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->ToFloatVector(), (std::vector<float>{0, 0, 10, 11, 0, 0}));
}

TEST(LookupTableErrors, IdOutOfRangeNamesPositionAndValue) {
  std::vector<int64_t> ids(8, 1);
  ids[5] = 300;
  auto out = TryRunOne(
      Lookup(),
      {{"w", RandomTensor({256, 4}, 1)}, {"ids", MakeTensor({2, 4}, ids)}},
      "out");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(),
            "op 0 (lookup_table): Ids[5] = 300 is out of range [0, 256)");
  ids[5] = -1;
  out = TryRunOne(
      Lookup(),
      {{"w", RandomTensor({256, 4}, 1)}, {"ids", MakeTensor({2, 4}, ids)}},
      "out");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "op 0 (lookup_table): Ids[5] = -1 is out of range [0, 256)");
}

TEST(LookupTableErrors, ShapeInference) {
  RegisterAllOps();
  Program p;
  SetMeta(TensorMeta{proto::FP32, {4, 2}}, p.global_block().AddVar("w"));
  SetMeta(TensorMeta{proto::INT32, {3}}, p.global_block().AddVar("ids"));
  SetMeta(TensorMeta{proto::INT64, {3}}, p.global_block().AddVar("ids64"));
  auto op = AppendOpInferShapes(p.global_block(), Lookup());
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.status().message(),
            "op 0 (lookup_table): Ids must be int64 but is int32[3]");
  op = AppendOpInferShapes(p.global_block(),
                           OpDescBuilder("lookup_table")
                               .Input("W", "w")
                               .Input("Ids", "ids64")
                               .Output("Out", "out")
                               .Attr("padding_idx", int64_t{4}));
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.status().message(),
            "op 0 (lookup_table): attribute padding_idx 4 is out of range "
            "[0, 4) of W [4, 2] (-1 means no padding)");
}

TEST(LookupTableGrad, RepeatedIdsAndPadding) {
  // Row 1 is looked up three times, row 3 is padding, row 4 is unused.
  GradCheckCase c;
  c.op = Lookup(3);
  c.inputs["w"] = RandomTensor({5, 3}, 2);
  c.inputs["ids"] = MakeTensor({2, 3}, std::vector<int64_t>{1, 3, 0, 1, 2, 1});
  c.check = {"w"};
  CheckGrad(c);
}

TEST(LookupTableGrad, DenseValues) {
  // d(sum(out * weight))/dW: weight rows added to their ids' rows.
  RegisterAllCpuKernels();
  Program p;
  Block& b = p.global_block();
  for (auto [name, meta] :
       {std::pair<const char*, TensorMeta>{"w", {proto::FP32, {3, 2}}},
        {"ids", {proto::INT64, {4}}},
        {"dout", {proto::FP32, {4, 2}}}}) {
    SetMeta(meta, b.AddVar(name));
    b.FindVar(name)->set_is_data(true);
  }
  ASSERT_TRUE(AppendOpInferShapes(b, OpDescBuilder("lookup_table_grad")
                                         .Input("W", "w")
                                         .Input("Ids", "ids")
                                         .Input("Out@GRAD", "dout")
                                         .Output("W@GRAD", "dw")
                                         .Attr("padding_idx", int64_t{0}))
                  .ok());
  Scope scope;
  scope.Var("w")->CopyFrom(MakeTensor({3, 2}, std::vector<float>(6, 9.0f)));
  scope.Var("ids")->CopyFrom(MakeTensor({4}, std::vector<int64_t>{2, 0, 2, 1}));
  scope.Var("dout")->CopyFrom(
      MakeTensor({4, 2}, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
  auto exec = SerialExecutor::Create(p, &scope, {{"dw"}});
  ASSERT_TRUE(exec.ok()) << exec.status();
  ASSERT_TRUE((*exec)->Run().ok());
  EXPECT_EQ(scope.Find("dw")->ToFloatVector(),
            (std::vector<float>{0, 0, 7, 8, 6, 8}));
}

// ---- vocabulary-sharded tables ----------------------------------------------

// Rows [begin, begin + n) of Table().
Tensor TableRows(int64_t begin, int64_t n) {
  std::vector<float> all = Table().ToFloatVector();
  return MakeTensor({n, 2}, std::vector<float>(all.begin() + begin * 2,
                                               all.begin() + (begin + n) * 2));
}

std::vector<float> Sum(const std::vector<float>& a,
                       const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  std::vector<float> s(a.size());
  for (size_t i = 0; i < a.size(); ++i) s[i] = a[i] + b[i];
  return s;
}

TEST(LookupTableSharded, TwoShardsSumToTheUnshardedLookup) {
  const Tensor ids = MakeTensor({2, 3}, std::vector<int64_t>{3, 0, 1, 2, 3, 1});
  Tensor full = RunOne(Lookup(), {{"w", Table()}, {"ids", ids}}, "out");
  Tensor lo =
      RunOne(ShardLookup(0), {{"w", TableRows(0, 2)}, {"ids", ids}}, "out");
  Tensor hi =
      RunOne(ShardLookup(2), {{"w", TableRows(2, 2)}, {"ids", ids}}, "out");
  EXPECT_EQ(lo.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(hi.shape(), (Shape{2, 3, 2}));
  // Each shard reads its own rows and zeros the others'.
  EXPECT_EQ(lo.ToFloatVector(),
            (std::vector<float>{0, 0, 0, 1, 10, 11, 0, 0, 0, 0, 10, 11}));
  EXPECT_EQ(hi.ToFloatVector(),
            (std::vector<float>{30, 31, 0, 0, 0, 0, 20, 21, 30, 31, 0, 0}));
  EXPECT_EQ(Sum(lo.ToFloatVector(), hi.ToFloatVector()), full.ToFloatVector());
}

TEST(LookupTableSharded, IdsPastEveryShardAreZeroNotErrors) {
  // A shard of rows [2, 4) of a table whose other shards hold ids 0-1 and 4+.
  Tensor out =
      RunOne(ShardLookup(2),
             {{"w", TableRows(2, 2)},
              {"ids", MakeTensor({4}, std::vector<int64_t>{4, 3, 1000, 2})}},
             "out");
  EXPECT_EQ(out.ToFloatVector(),
            (std::vector<float>{0, 0, 30, 31, 0, 0, 20, 21}));
}

TEST(LookupTableSharded, PaddingIdxIsAGlobalId) {
  // padding_idx 3 is local row 1 of the shard starting at 2; padding_idx 7
  // is in no shard at all, which only the full vocabulary can judge.
  const Tensor ids = MakeTensor({3}, std::vector<int64_t>{3, 2, 0});
  Tensor hi =
      RunOne(ShardLookup(2, 3), {{"w", TableRows(2, 2)}, {"ids", ids}}, "out");
  EXPECT_EQ(hi.ToFloatVector(), (std::vector<float>{0, 0, 20, 21, 0, 0}));
  Tensor lo =
      RunOne(ShardLookup(0, 3), {{"w", TableRows(0, 2)}, {"ids", ids}}, "out");
  Tensor full = RunOne(Lookup(3), {{"w", Table()}, {"ids", ids}}, "out");
  EXPECT_EQ(Sum(lo.ToFloatVector(), hi.ToFloatVector()), full.ToFloatVector());
  Tensor far =
      RunOne(ShardLookup(2, 7), {{"w", TableRows(2, 2)}, {"ids", ids}}, "out");
  EXPECT_EQ(far.ToFloatVector(), (std::vector<float>{30, 31, 20, 21, 0, 0}));
}

TEST(LookupTableSharded, NegativeIdIsStillAnError) {
  auto out =
      TryRunOne(ShardLookup(2),
                {{"w", TableRows(2, 2)},
                 {"ids", MakeTensor({3}, std::vector<int64_t>{2, 9, -1})}},
                "out");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(),
            "op 0 (lookup_table): Ids[2] = -1 is negative (W is the shard of "
            "rows [2, 4))");
  // The gradient checks its ids the same way.
  auto grad = TryRunOne(OpDescBuilder("lookup_table_grad")
                            .Input("W", "w")
                            .Input("Ids", "ids")
                            .Input("Out@GRAD", "dout")
                            .Output("W@GRAD", "dw")
                            .Attr("start_index", int64_t{0}),
                        {{"w", TableRows(0, 2)},
                         {"ids", MakeTensor({2}, std::vector<int64_t>{-3, 0})},
                         {"dout", RandomTensor({2, 2}, 5)}},
                        "dw");
  ASSERT_FALSE(grad.ok());
  EXPECT_EQ(grad.status().message(),
            "op 0 (lookup_table_grad): Ids[0] = -3 is negative (W is the "
            "shard of rows [0, 2))");
}

TEST(LookupTableSharded, AttributeErrors) {
  RegisterAllOps();
  Program p;
  SetMeta(TensorMeta{proto::FP32, {2, 2}}, p.global_block().AddVar("w"));
  SetMeta(TensorMeta{proto::INT64, {3}}, p.global_block().AddVar("ids"));
  auto op = AppendOpInferShapes(p.global_block(), ShardLookup(-2));
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.status().message(),
            "op 0 (lookup_table): attribute start_index is -2, must be -1 "
            "(unsharded) or >= 0");
  op = AppendOpInferShapes(p.global_block(), ShardLookup(2, -5));
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.status().message(),
            "op 0 (lookup_table): attribute padding_idx is -5, must be a "
            "global id >= 0 or -1 for no padding");
  // A global padding_idx past the shard is fine when sharded.
  op = AppendOpInferShapes(p.global_block(), ShardLookup(2, 100));
  EXPECT_TRUE(op.ok()) << op.status();
}

TEST(LookupTableSharded, GradMakerCarriesStartIndex) {
  RegisterAllOps();
  auto grads = OpRegistry::Global()
                   .Find("lookup_table")
                   ->grad_maker()(ShardLookup(6, 7));
  ASSERT_EQ(grads.size(), 1u);
  EXPECT_EQ(grads[0].type(), "lookup_table_grad");
  EXPECT_EQ(
      AttrValue<int64_t>::Get(*FindAttrOrDefault(grads[0], "start_index")), 6);
  EXPECT_EQ(
      AttrValue<int64_t>::Get(*FindAttrOrDefault(grads[0], "padding_idx")), 7);
  EXPECT_TRUE(CheckOpSchema(grads[0]).ok()) << CheckOpSchema(grads[0]);
}

TEST(LookupTableShardedGrad, IdsInsideAndOutsideTheShard) {
  // The shard holds global rows [2, 5); ids 0, 1 and 9 belong to other
  // shards, 3 is looked up twice and 4 is padding.
  GradCheckCase c;
  c.op = ShardLookup(2, 4);
  c.inputs["w"] = RandomTensor({3, 3}, 3);
  c.inputs["ids"] =
      MakeTensor({2, 4}, std::vector<int64_t>{0, 3, 2, 9, 4, 1, 3, 2});
  c.check = {"w"};
  CheckGrad(c);
}

TEST(LookupTableShardedGrad, DenseValues) {
  // Shard of rows [1, 3): id 2 -> row 1, id 1 -> row 0, ids 0 and 5 add
  // nothing.
  Tensor dw = RunOne(
      OpDescBuilder("lookup_table_grad")
          .Input("W", "w")
          .Input("Ids", "ids")
          .Input("Out@GRAD", "dout")
          .Output("W@GRAD", "dw")
          .Attr("start_index", int64_t{1}),
      {{"w", MakeTensor({2, 2}, std::vector<float>(4, 9.0f))},
       {"ids", MakeTensor({5}, std::vector<int64_t>{2, 0, 2, 5, 1})},
       {"dout",
        MakeTensor({5, 2}, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})}},
      "dw");
  EXPECT_EQ(dw.ToFloatVector(), (std::vector<float>{9, 10, 6, 8}));
}

}  // namespace
}  // namespace loom
