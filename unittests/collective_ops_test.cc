// Communication ops: shape inference, the identity kernel, the grad makers
// that pair identity with allreduce and allgather with reduce_scatter, the
// multi-tensor (bucketed) allreduce, and allgather and reduce_scatter along
// dim 1 (sequence parallelism) over Gloo and on one rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "executor/comm/comm_world.h"
#include "executor/comm_kernels.h"
#include "executor/serial_executor.h"
#include "framework/autodiff.h"
#include "framework/low_precision.h"
#include "framework/op_builder.h"
#include "framework/shape_inference.h"
#include "framework/verifier.h"
#include "framework/wire_dtype.h"
#include "unittests/comm_test_util.h"

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

TEST(CollectiveShapes, AlongAxis) {
  Program p = WithX({2, 6, 4});
  Block& b = p.global_block();
  ASSERT_TRUE(AppendOpInferShapes(b, OpDescBuilder("allgather")
                                         .Input("X", "x")
                                         .Output("Out", "g")
                                         .Attr("nranks", 3)
                                         .Attr("axis", 1))
                  .ok());
  EXPECT_EQ(MetaOf(*b.FindVar("g")), (TensorMeta{proto::FP32, {2, 18, 4}}));
  ASSERT_TRUE(AppendOpInferShapes(b, OpDescBuilder("reduce_scatter")
                                         .Input("X", "x")
                                         .Output("Out", "s")
                                         .Attr("nranks", 2)
                                         .Attr("axis", 1))
                  .ok());
  EXPECT_EQ(MetaOf(*b.FindVar("s")), (TensorMeta{proto::FP32, {2, 3, 4}}));
}

TEST(CollectiveShapes, AxisErrors) {
  Program p = WithX({6, 4});
  Block& b = p.global_block();
  auto along = [](const std::string& type, int nranks, int axis) {
    return OpDescBuilder(type)
        .Input("X", "x")
        .Output("Out", type + "_out")
        .Attr("nranks", nranks)
        .Attr("axis", axis);
  };
  auto op = AppendOpInferShapes(b, along("allgather", 2, 2));
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(op.status().message(), "op 0 (allgather): attribute axis 2 is not a dim of X [6, 4]");
  op = AppendOpInferShapes(b, along("reduce_scatter", 2, -1));
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.status().message(),
            "op 0 (reduce_scatter): attribute axis -1 is not a dim of X [6, 4]");
  op = AppendOpInferShapes(b, along("reduce_scatter", 3, 1));
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.status().message(),
            "op 0 (reduce_scatter): dim 1 of X [6, 4] is not divisible by attribute nranks 3");
  // A flat buffer's shard is a range of dim 0.
  op = AppendOpInferShapes(b, along("reduce_scatter", 2, 1).Input("Members", "x"));
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.status().message(),
            "op 0 (reduce_scatter): attribute axis is 1; a reduce_scatter of a flat buffer "
            "(Members) splits dim 0");
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
  EXPECT_EQ(AttrValue<int32_t>::Get(*FindAttrOrDefault(g, "axis")), 0);
}

TEST(CollectiveGrad, AxisIsCarried) {
  RegisterAllOps();
  for (const char* type : {"allgather", "reduce_scatter"}) {
    proto::OpDesc g = OnlyGrad(
        OpDescBuilder(type).Input("X", "x").Output("Out", "y").Attr("nranks", 2).Attr("axis", 1));
    EXPECT_EQ(AttrValue<int32_t>::Get(*FindAttrOrDefault(g, "axis")), 1) << type;
    Status schema = CheckOpSchema(g);
    EXPECT_TRUE(schema.ok()) << schema;
  }
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

// ---- allgather and reduce_scatter along dim 1 -------------------------------

// Rank r's element i of X: distinct over ranks and elements. Quarters: fp32
// sums of a few are exact, and bf16 (a step of 0.5 from 64) rounds some.
float SeqValue(int rank, int64_t i) { return 100.0f * rank + i + 1.25f; }

Tensor SeqInput(int rank, const Shape& shape) {
  Tensor t(TensorMeta{proto::FP32, shape});
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = SeqValue(rank, i);
  return t;
}

proto::OpDesc AlongDim1(const std::string& type, int nranks, const std::string& wire = "") {
  OpDescBuilder b(type);
  b.Input("X", "x").Output("Out", "y").Attr("nranks", nranks).Attr("axis", 1);
  if (!wire.empty()) b.Attr(kWireDtypeAttr, wire);
  return b.Build();
}

Status RunComm(const CommKernelFn& kernels, const proto::OpDesc& desc, Tensor* in, Tensor* out) {
  Instruction ins;
  ins.ring = kDpRing;
  ins.op_type = desc.type();
  ins.call = CommCallOf(desc.type());  // as lowering sets it, from the schema
  const std::vector<BoundSlot> ins_slots = {{"X", {in}}}, out_slots = {{"Out", {out}}};
  return kernels(ins, KernelContext(desc, ins_slots, out_slots));
}

// Over a dp ring of n ranks, X of [batch, 3, 4] per rank: the allgather is
// the rank-order join along dim 1, and the reduce_scatter of [batch, 3n, 4]
// gives rank q the sums of the q-th slice along dim 1, in fp32 and in bf16
// (each rank's values rounded once, the float sum rounded once). Batch 1
// leaves the data laid out as along dim 0; batch 2 interleaves it.
void CheckAlongDim1OverGloo(int n) {
  CommWorldOptions options;
  options.job = StrCat("collective-axis-", n);
  options.timeout = std::chrono::seconds(20);
  auto round = [](float v) { return ToFloat(ToBfloat16(v)); };
  testing::RunRanks(n, [&](int rank) {
    auto world = CommWorld::Create(ParallelLayout{/*dp=*/n, /*mp=*/1, /*pp=*/1}, rank, options);
    ASSERT_TRUE(world.ok()) << world.status();
    const CommKernelFn kernels = MakeCommKernels(world->get());
    for (int64_t batch : {1, 2}) {
      SCOPED_TRACE(StrCat("rank ", rank, " of ", n, ", batch ", batch));
      Tensor x = SeqInput(rank, {batch, 3, 4});
      Tensor gathered(TensorMeta{proto::FP32, {batch, 3 * n, 4}});
      Status s = RunComm(kernels, AlongDim1("allgather", n), &x, &gathered);
      ASSERT_TRUE(s.ok()) << s;
      std::vector<float> want;
      for (int64_t b = 0; b < batch; ++b) {
        for (int j = 0; j < 3 * n; ++j) {
          for (int h = 0; h < 4; ++h) want.push_back(SeqValue(j / 3, (b * 3 + j % 3) * 4 + h));
        }
      }
      EXPECT_EQ(gathered.ToFloatVector(), want);

      for (const std::string wire : {"", "bf16"}) {
        SCOPED_TRACE(StrCat("wire '", wire, "'"));
        Tensor y = SeqInput(rank, {batch, 3 * n, 4});
        Tensor part(TensorMeta{proto::FP32, {batch, 3, 4}});
        s = RunComm(kernels, AlongDim1("reduce_scatter", n, wire), &y, &part);
        ASSERT_TRUE(s.ok()) << s;
        want.clear();
        int rounded = 0;
        for (int64_t b = 0; b < batch; ++b) {
          for (int j = 0; j < 3; ++j) {
            for (int h = 0; h < 4; ++h) {
              const int64_t at = (b * 3 * n + rank * 3 + j) * 4 + h;
              float exact = 0, wired = 0;
              for (int r = 0; r < n; ++r) {
                exact += SeqValue(r, at);
                wired += round(SeqValue(r, at));
              }
              want.push_back(wire.empty() ? exact : round(wired));
              rounded += want.back() != exact;
            }
          }
        }
        EXPECT_EQ(part.ToFloatVector(), want);
        if (!wire.empty()) {
          EXPECT_GT(rounded, 0) << "the values do not show the wire dtype";
        }
      }
    }
  });
}

TEST(CollectiveAxis, GlooKernelsJoinAndSplitAlongDim1) {
  RegisterAllOps();
  CheckAlongDim1OverGloo(2);
  CheckAlongDim1OverGloo(3);
}

// One rank's kernels: the allgather repeats each [3, 4] block of X along
// dim 1, the reduce_scatter keeps each block's first part.
TEST(CollectiveAxis, LocalKernelsAlongDim1) {
  RegisterAllOps();
  const CommKernelFn kernels = MakeLocalCommKernels();
  Tensor x = SeqInput(0, {2, 3, 4});
  Tensor gathered(TensorMeta{proto::FP32, {2, 9, 4}});
  Status s = RunComm(kernels, AlongDim1("allgather", 3), &x, &gathered);
  ASSERT_TRUE(s.ok()) << s;
  std::vector<float> want;
  for (int b = 0; b < 2; ++b) {
    for (int j = 0; j < 9; ++j) {
      for (int h = 0; h < 4; ++h) want.push_back(SeqValue(0, (b * 3 + j % 3) * 4 + h));
    }
  }
  EXPECT_EQ(gathered.ToFloatVector(), want);

  Tensor y = SeqInput(0, {2, 9, 4});
  Tensor part(TensorMeta{proto::FP32, {2, 3, 4}});
  s = RunComm(kernels, AlongDim1("reduce_scatter", 3), &y, &part);
  ASSERT_TRUE(s.ok()) << s;
  want.clear();
  for (int b = 0; b < 2; ++b) {
    for (int i = 0; i < 12; ++i) want.push_back(SeqValue(0, b * 36 + i));
  }
  EXPECT_EQ(part.ToFloatVector(), want);
}

}  // namespace
}  // namespace loom
