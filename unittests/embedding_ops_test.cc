// lookup_table: forward rows, padding, the dense gradient and id errors.
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

}  // namespace
}  // namespace loom
