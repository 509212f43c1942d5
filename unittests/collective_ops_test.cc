// Communication ops: shape inference, the identity kernel, the grad makers
// that pair identity with allreduce and allgather with reduce_scatter, and
// the multi-tensor (bucketed) allreduce.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "executor/serial_executor.h"
#include "framework/autodiff.h"
#include "framework/op_builder.h"
#include "framework/shape_inference.h"
#include "framework/verifier.h"

namespace loom {
namespace {

// A block declaring x as a parameter of `shape`.
Program WithX(const Shape& shape) {
  RegisterAllOps();
  Program p;
  auto* x = p.global_block().AddVar("x");
  SetMeta(TensorMeta{proto::FP32, shape}, x);
  x->set_is_parameter(true);
  x->set_persistable(true);
  return p;
}

proto::OpDesc Unary(const std::string& type, int32_t ring_id = 0) {
  return OpDescBuilder(type)
      .Input("X", "x")
      .Output("Out", "y")
      .Attr("ring_id", ring_id);
}

TEST(CollectiveShapes, AllgatherAndReduceScatter) {
  Program p = WithX({6, 4});
  Block& b = p.global_block();
  ASSERT_TRUE(AppendOpInferShapes(b, OpDescBuilder("allgather")
                                         .Input("X", "x")
                                         .Output("Out", "g")
                                         .Attr("nranks", 4))
                  .ok());
  EXPECT_EQ(MetaOf(*b.FindVar("g")), (TensorMeta{proto::FP32, {24, 4}}));
  ASSERT_TRUE(AppendOpInferShapes(b, OpDescBuilder("reduce_scatter")
                                         .Input("X", "x")
                                         .Output("Out", "s")
                                         .Attr("nranks", 3))
                  .ok());
  EXPECT_EQ(MetaOf(*b.FindVar("s")), (TensorMeta{proto::FP32, {2, 4}}));
  for (const char* type : {"allreduce", "identity", "broadcast"}) {
    auto op = AppendOpInferShapes(b, OpDescBuilder(type).Input("X", "x").Output(
                                         "Out", std::string(type) + "_out"));
    ASSERT_TRUE(op.ok()) << type << ": " << op.status();
    EXPECT_TRUE(OpRegistry::Global().Find(type)->communication()) << type;
    EXPECT_EQ(MetaOf(*b.FindVar(std::string(type) + "_out")),
              (TensorMeta{proto::FP32, {6, 4}}));
  }
}

TEST(CollectiveShapes, Errors) {
  Program p = WithX({6, 4});
  Block& b = p.global_block();
  auto op = AppendOpInferShapes(b, OpDescBuilder("reduce_scatter")
                                       .Input("X", "x")
                                       .Output("Out", "s")
                                       .Attr("nranks", 4));
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.status().message(),
            "op 0 (reduce_scatter): dim 0 of X [6, 4] is not divisible by "
            "attribute nranks 4");
  op = AppendOpInferShapes(b, OpDescBuilder("allgather")
                                  .Input("X", "x")
                                  .Output("Out", "g")
                                  .Attr("nranks", 0));
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.status().message(),
            "op 0 (allgather): attribute nranks is 0, must be >= 1");
  op = AppendOpInferShapes(
      b, OpDescBuilder("allgather").Input("X", "x").Output("Out", "g"));
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.status().message(),
            "op 0 (allgather): missing required attribute 'nranks'");
  op = AppendOpInferShapes(b, OpDescBuilder("allreduce")
                                  .Input("X", "x")
                                  .Output("Out", "r")
                                  .Attr("reduce_op", "prod"));
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.status().message(),
            "op 0 (allreduce): attribute reduce_op 'prod' is not one of sum, "
            "avg, max");
  EXPECT_TRUE(AppendOpInferShapes(b, OpDescBuilder("allreduce")
                                         .Input("X", "x")
                                         .Output("Out", "r")
                                         .Attr("reduce_op", "max"))
                  .ok());
}

TEST(CollectiveShapes, SendHasNoOutputsAndRecvMakesOne) {
  Program p = WithX({6, 4});
  Block& b = p.global_block();
  auto send = AppendOpInferShapes(
      b, OpDescBuilder("send").Input("X", "x").Attr("peer", 1));
  ASSERT_TRUE(send.ok()) << send.status();
  EXPECT_TRUE((*send)->OutputVars().empty());
  auto recv = AppendOpInferShapes(
      b, OpDescBuilder("recv")
             .Output("Out", "r")
             .Attr("peer", 1)
             .Attr("out_shape", std::vector<int64_t>{2, 3})
             .Attr("dtype", static_cast<int32_t>(proto::BF16)));
  ASSERT_TRUE(recv.ok()) << recv.status();
  EXPECT_EQ(MetaOf(*b.FindVar("r")), (TensorMeta{proto::BF16, {2, 3}}));
  Status verified = VerifyProgram(p);
  EXPECT_TRUE(verified.ok()) << verified;
  auto missing = AppendOpInferShapes(b, OpDescBuilder("send").Input("X", "x"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "op 2 (send): missing required attribute 'peer'");
}

TEST(IdentityForward, CopiesX) {
  RegisterAllCpuKernels();
  Program p;
  auto* x = p.global_block().AddVar("x");
  SetMeta(TensorMeta{proto::FP32, {2, 2}}, x);
  x->set_is_data(true);
  ASSERT_TRUE(AppendOpInferShapes(p.global_block(), Unary("identity")).ok());
  Scope scope;
  scope.Var("x")->CopyFrom(MakeTensor({2, 2}, std::vector<float>{1, -2, 3, 4}));
  auto exec = SerialExecutor::Create(p, &scope, {{"y"}});
  ASSERT_TRUE(exec.ok()) << exec.status();
  ASSERT_TRUE((*exec)->Run().ok());
  EXPECT_EQ(scope.Find("y")->ToFloatVector(),
            (std::vector<float>{1, -2, 3, 4}));
  EXPECT_NE(scope.Find("y")->raw_data(), scope.Find("x")->raw_data());
}

// The grad op the registry makes for `fwd`.
proto::OpDesc OnlyGrad(const proto::OpDesc& fwd) {
  auto grads = OpRegistry::Global().Find(fwd.type())->grad_maker()(fwd);
  CHECK_EQ(grads.size(), 1u);
  return grads[0];
}

TEST(CollectiveGrad, IdentityAndAllreduceArePaired) {
  RegisterAllOps();
  proto::OpDesc g = OnlyGrad(Unary("identity", 3));
  EXPECT_EQ(g.type(), "allreduce");
  EXPECT_EQ(SlotVars(g.inputs(), "X"), (std::vector<std::string>{"y@GRAD"}));
  EXPECT_EQ(SlotVars(g.outputs(), "Out"), (std::vector<std::string>{"x@GRAD"}));
  EXPECT_EQ(AttrValue<int32_t>::Get(*FindAttrOrDefault(g, "ring_id")), 3);
  EXPECT_EQ(AttrValue<std::string>::Get(*FindAttrOrDefault(g, "reduce_op")),
            "sum");

  g = OnlyGrad(Unary("allreduce", 2));
  EXPECT_EQ(g.type(), "identity");
  EXPECT_EQ(SlotVars(g.inputs(), "X"), (std::vector<std::string>{"y@GRAD"}));
  EXPECT_EQ(SlotVars(g.outputs(), "Out"), (std::vector<std::string>{"x@GRAD"}));
  EXPECT_EQ(AttrValue<int32_t>::Get(*FindAttrOrDefault(g, "ring_id")), 2);

  EXPECT_FALSE(OpRegistry::Global().Find("broadcast")->differentiable());
  EXPECT_FALSE(OpRegistry::Global().Find("send")->differentiable());
  EXPECT_FALSE(OpRegistry::Global().Find("recv")->differentiable());
}

TEST(CollectiveGrad, AllgatherAndReduceScatterArePaired) {
  RegisterAllOps();
  proto::OpDesc g = OnlyGrad(OpDescBuilder("allgather")
                                 .Input("X", "x")
                                 .Output("Out", "y")
                                 .Attr("nranks", 4)
                                 .Attr("ring_id", 1));
  EXPECT_EQ(g.type(), "reduce_scatter");
  EXPECT_EQ(AttrValue<int32_t>::Get(*FindAttrOrDefault(g, "nranks")), 4);
  EXPECT_EQ(AttrValue<int32_t>::Get(*FindAttrOrDefault(g, "ring_id")), 1);
  g = OnlyGrad(OpDescBuilder("reduce_scatter")
                   .Input("X", "x")
                   .Output("Out", "y")
                   .Attr("nranks", 2));
  EXPECT_EQ(g.type(), "allgather");
  EXPECT_EQ(AttrValue<int32_t>::Get(*FindAttrOrDefault(g, "nranks")), 2);
}

TEST(CollectiveGrad, AutodiffEmitsTheMirrorOps) {
  // x -> identity -> allgather -> reduce_sum: backward must run
  // reduce_sum_grad, reduce_scatter, allreduce, with shapes that check out.
  Program p = WithX({2, 3});
  Block& b = p.global_block();
  ASSERT_TRUE(AppendOpInferShapes(b, Unary("identity")).ok());
  ASSERT_TRUE(AppendOpInferShapes(b, OpDescBuilder("allgather")
                                         .Input("X", "y")
                                         .Output("Out", "z")
                                         .Attr("nranks", 2))
                  .ok());
  ASSERT_TRUE(AppendOpInferShapes(b, OpDescBuilder("reduce_sum")
                                         .Input("X", "z")
                                         .Output("Out", "loss")
                                         .Attr("reduce_all", true))
                  .ok());
  auto pairs = AppendBackward(p, "loss");
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  std::vector<std::string> types;
  for (Op* op : b.ops()) types.push_back(op->type());
  EXPECT_EQ(types, (std::vector<std::string>{
                       "identity", "allgather", "reduce_sum", "fill_constant",
                       "reduce_sum_grad", "reduce_scatter", "allreduce"}));
  EXPECT_EQ(MetaOf(*b.FindVar("y@GRAD")), (TensorMeta{proto::FP32, {2, 3}}));
  EXPECT_EQ(b.back()->Output("Out"), "x@GRAD");
  Status verified = VerifyProgram(p);
  EXPECT_TRUE(verified.ok()) << verified;
}

// ---- bucketed allreduce -----------------------------------------------------

// A block declaring parameters a, b and c of different metas.
Program WithBucket() {
  RegisterAllOps();
  Program p;
  const std::vector<std::pair<std::string, TensorMeta>> vars = {
      {"a", {proto::FP32, {6, 4}}},
      {"b", {proto::FP32, {3}}},
      {"c", {proto::BF16, {2, 5, 7}}}};
  for (const auto& [name, meta] : vars) {
    auto* v = p.global_block().AddVar(name);
    SetMeta(meta, v);
    v->set_is_parameter(true);
    v->set_persistable(true);
  }
  return p;
}

proto::OpDesc Bucket(const std::vector<std::string>& xs,
                     const std::vector<std::string>& outs,
                     int32_t ring_id = 0) {
  return OpDescBuilder("allreduce")
      .Input("X", xs)
      .Output("Out", outs)
      .Attr("ring_id", ring_id);
}

TEST(AllreduceBucket, EachOutGetsItsXsMeta) {
  Program p = WithBucket();
  Block& b = p.global_block();
  auto op = AppendOpInferShapes(b, Bucket({"a", "b", "c"}, {"ra", "rb", "rc"}));
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(MetaOf(*b.FindVar("ra")), (TensorMeta{proto::FP32, {6, 4}}));
  EXPECT_EQ(MetaOf(*b.FindVar("rb")), (TensorMeta{proto::FP32, {3}}));
  EXPECT_EQ(MetaOf(*b.FindVar("rc")), (TensorMeta{proto::BF16, {2, 5, 7}}));
  Status verified = VerifyProgram(p);
  EXPECT_TRUE(verified.ok()) << verified;
}

TEST(AllreduceBucket, CountMismatchNamesBothCounts) {
  Program p = WithBucket();
  Block& b = p.global_block();
  auto op = AppendOpInferShapes(b, Bucket({"a", "b", "c"}, {"ra", "rb"}));
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(op.status().message(),
            "op 0 (allreduce): input X holds 3 vars but output Out holds 2; "
            "they must match");
  op = AppendOpInferShapes(b, Bucket({"a"}, {"ra", "rb"}));
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.status().message(),
            "op 0 (allreduce): input X holds 1 vars but output Out holds 2; "
            "they must match");
  // An existing output var must already have its X's meta.
  SetMeta(TensorMeta{proto::FP32, {3}}, b.AddVar("wrong"));
  op = AppendOpInferShapes(b, Bucket({"a", "b"}, {"wrong", "rb"}));
  EXPECT_FALSE(op.ok());
}

TEST(AllreduceBucket, GradIsOneIdentityPerPair) {
  RegisterAllOps();
  const proto::OpDesc fwd = Bucket({"a", "b", "c"}, {"ra", "rb", "rc"}, 5);
  auto grads = OpRegistry::Global().Find("allreduce")->grad_maker()(fwd);
  ASSERT_EQ(grads.size(), 3u);
  const std::vector<std::string> xs = {"a", "b", "c"};
  const std::vector<std::string> outs = {"ra", "rb", "rc"};
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(grads[i].type(), "identity");
    EXPECT_EQ(SlotVars(grads[i].inputs(), "X"),
              (std::vector<std::string>{outs[i] + "@GRAD"}));
    EXPECT_EQ(SlotVars(grads[i].outputs(), "Out"),
              (std::vector<std::string>{xs[i] + "@GRAD"}));
    EXPECT_EQ(AttrValue<int32_t>::Get(*FindAttrOrDefault(grads[i], "ring_id")),
              5);
    Status schema = CheckOpSchema(grads[i]);
    EXPECT_TRUE(schema.ok()) << schema;
  }
}

TEST(AllreduceBucket, AutodiffEmitsAnIdentityPerParameter) {
  // a, b -> allreduce([a, b]) -> reduce_sum each -> sum -> loss. The
  // backward gives a and b their gradients through one identity each.
  Program p = WithBucket();
  Block& b = p.global_block();
  ASSERT_TRUE(AppendOpInferShapes(b, Bucket({"a", "b"}, {"ra", "rb"})).ok());
  for (const char* v : {"a", "b"}) {
    ASSERT_TRUE(AppendOpInferShapes(b, OpDescBuilder("reduce_sum")
                                           .Input("X", std::string("r") + v)
                                           .Output("Out", std::string("s") + v)
                                           .Attr("reduce_all", true))
                    .ok());
  }
  ASSERT_TRUE(AppendOpInferShapes(
                  b, OpDescBuilder("sum")
                         .Input("X", std::vector<std::string>{"sa", "sb"})
                         .Output("Out", "loss"))
                  .ok());
  auto pairs = AppendBackward(p, "loss");
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  std::vector<std::string> identities;
  for (Op* op : b.ops()) {
    if (op->type() == "identity") identities.push_back(op->Output("Out"));
  }
  std::sort(identities.begin(), identities.end());
  EXPECT_EQ(identities, (std::vector<std::string>{"a@GRAD", "b@GRAD"}));
  EXPECT_EQ(MetaOf(*b.FindVar("a@GRAD")), (TensorMeta{proto::FP32, {6, 4}}));
  EXPECT_EQ(MetaOf(*b.FindVar("b@GRAD")), (TensorMeta{proto::FP32, {3}}));
  Status verified = VerifyProgram(p);
  EXPECT_TRUE(verified.ok()) << verified;
}

}  // namespace
}  // namespace loom
