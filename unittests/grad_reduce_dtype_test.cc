// Gradients reduced in the compute dtype (amp.grad_reduce_dtype,
// framework/wire_dtype.h): the attribute's checks, the bytes the cost model
// prices, the rounding the communication kernels do over real Gloo, and
// bf16 O2 training on dp layouts with ZeRO, against fp32 reduction.
#include <chrono>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include <gtest/gtest.h>

#include "executor/comm/comm_world.h"
#include "executor/comm_kernels.h"
#include "framework/low_precision.h"
#include "framework/op_builder.h"
#include "framework/op_registry.h"
#include "framework/op_work.h"
#include "framework/shape_inference.h"
#include "framework/wire_dtype.h"
#include "models/gpt.h"
#include "passes/amp.h"
#include "passes/strategy.h"
#include "runtime/parallel_trainer.h"
#include "unittests/comm_test_util.h"
#include "unittests/parameter_compare.h"

namespace loom {
namespace {

TEST(WireDtype, ParsesNarrowingFromFp32Only) {
  EXPECT_EQ(ParseWireDtype("", proto::FP32).value(), proto::FP32);
  EXPECT_EQ(ParseWireDtype("bf16", proto::FP32).value(), proto::BF16);
  EXPECT_EQ(ParseWireDtype("fp16", proto::FP32).value(), proto::FP16);
  EXPECT_EQ(ParseWireDtype("bf16", proto::BF16).value(), proto::BF16);
  const Status bad = ParseWireDtype("int8", proto::FP32).status();
  EXPECT_NE(bad.message().find("'int8' is not one of fp32, bf16, fp16"), std::string::npos)
      << bad;
  const Status cross = ParseWireDtype("fp16", proto::BF16).status();
  EXPECT_NE(cross.message().find("only fp32 data"), std::string::npos) << cross;
}

// A bucket all-reduce of two fp32 gradients, and a reduce-scatter.
Block& Bucket(Program& p, const std::string& wire) {
  RegisterAllOps();
  Block& b = p.global_block();
  SetMeta(TensorMeta{proto::FP32, {6}}, b.AddVar("g0"));
  SetMeta(TensorMeta{proto::FP32, {10}}, b.AddVar("g1"));
  EXPECT_TRUE(AppendOpInferShapes(b, OpDescBuilder("allreduce")
                                         .Input("X", std::vector<std::string>{"g0", "g1"})
                                         .Output("Out", std::vector<std::string>{"g0", "g1"})
                                         .Attr("reduce_op", std::string("avg"))
                                         .Attr(kWireDtypeAttr, wire))
                  .ok());
  EXPECT_TRUE(AppendOpInferShapes(b, OpDescBuilder("reduce_scatter")
                                         .Input("X", "g1")
                                         .Output("Out", "part")
                                         .Attr("nranks", int32_t{2})
                                         .Attr(kWireDtypeAttr, wire))
                  .ok());
  return b;
}

TEST(WireDtype, CostModelPricesTheWireBytes) {
  Program fp32, bf16;
  const Block& a = Bucket(fp32, "");
  const Block& b = Bucket(bf16, "bf16");
  EXPECT_EQ(WorkOf(*a.OpVector()[0]).comm_bytes, 16 * 4);
  EXPECT_EQ(WorkOf(*b.OpVector()[0]).comm_bytes, 16 * 2);
  EXPECT_EQ(WorkOf(*a.OpVector()[1]).comm_bytes, 10 * 4);
  EXPECT_EQ(WorkOf(*b.OpVector()[1]).comm_bytes, 10 * 2);
}

TEST(WireDtype, ShapeInferenceRejectsWhatCannotBeReduced) {
  RegisterAllOps();
  Program p;
  Block& b = p.global_block();
  SetMeta(TensorMeta{proto::FP32, {4}}, b.AddVar("g"));
  SetMeta(TensorMeta{proto::BF16, {4}}, b.AddVar("h"));
  auto reduce = [](const std::string& x, const std::string& wire, int parts) {
    return OpDescBuilder("allreduce")
        .Input("X", x)
        .Output("Out", x)
        .Attr("fetch_parts", int32_t{parts})
        .Attr(kWireDtypeAttr, wire);
  };
  Status s = AppendOpInferShapes(b, reduce("g", "bf8", 0)).status();
  EXPECT_NE(s.message().find("wire_dtype: wire dtype 'bf8' is not one of"), std::string::npos)
      << s;
  s = AppendOpInferShapes(b, reduce("h", "fp16", 0)).status();
  EXPECT_NE(s.message().find("only fp32 data"), std::string::npos) << s;
  s = AppendOpInferShapes(b, reduce("g", "bf16", 2)).status();
  EXPECT_NE(s.message().find("a fetch (fetch_parts) moves its data exactly"), std::string::npos)
      << s;
}

// Over Gloo: each rank's values are rounded to bf16 once, the sum of the
// rounded values is taken in float and divided, and rounded once; the
// result lands in the fp32 tensors. The values sit between bf16 neighbours,
// so an all-reduce that ignored the wire dtype gives other numbers.
TEST(WireDtype, KernelsRoundEachRanksPartOnceAndTheResultOnce) {
  const ParallelLayout layout{/*dp=*/2, /*mp=*/1, /*pp=*/1};
  auto value = [](int rank, int i) { return 1.0f + 0.0013f * (i + 1) + 0.0021f * rank; };
  auto want = [&](int i) {
    const float sum = ToFloat(ToBfloat16(value(0, i))) + ToFloat(ToBfloat16(value(1, i)));
    return ToFloat(ToBfloat16(sum / 2.0f));
  };
  CommWorldOptions options;
  options.job = "wire-dtype-kernels";
  options.timeout = std::chrono::seconds(20);
  testing::RunRanks(2, [&](int rank) {
    auto world = CommWorld::Create(layout, rank, options);
    ASSERT_TRUE(world.ok()) << world.status();
    const CommKernelFn kernels = MakeCommKernels(world->get());
    Program program;
    const Block& block = Bucket(program, "bf16");
    std::vector<Tensor> g = {Tensor(TensorMeta{proto::FP32, {6}}),
                             Tensor(TensorMeta{proto::FP32, {10}})};
    for (int i = 0; i < 6; ++i) g[0].data<float>()[i] = value(rank, i);
    for (int i = 0; i < 10; ++i) g[1].data<float>()[i] = value(rank, 6 + i);
    Instruction ins;
    ins.ring = kDpRing;
    ins.op_type = "allreduce";
    ins.call = CommCall::kAllReduce;
    const std::vector<BoundSlot> bucket = {{"X", {&g[0], &g[1]}}};
    const std::vector<BoundSlot> bucket_out = {{"Out", {&g[0], &g[1]}}};
    Status s = kernels(ins, KernelContext(block.OpVector()[0]->desc(), bucket, bucket_out));
    ASSERT_TRUE(s.ok()) << s;
    int differs_from_fp32 = 0;
    for (int i = 0; i < 16; ++i) {
      const float got = i < 6 ? g[0].data<float>()[i] : g[1].data<float>()[i - 6];
      EXPECT_EQ(got, want(i)) << "element " << i;
      differs_from_fp32 += got != (value(0, i) + value(1, i)) / 2.0f;
    }
    EXPECT_GT(differs_from_fp32, 8);

    // The reduce-scatter of the 10 (now equal) values: this rank's half.
    for (int i = 0; i < 10; ++i) g[1].data<float>()[i] = value(rank, i);
    Tensor part(TensorMeta{proto::FP32, {5}});
    ins.op_type = "reduce_scatter";
    ins.call = CommCall::kReduceScatter;
    const std::vector<BoundSlot> in = {{"X", {&g[1]}}}, out = {{"Out", {&part}}};
    s = kernels(ins, KernelContext(block.OpVector()[1]->desc(), in, out));
    ASSERT_TRUE(s.ok()) << s;
    for (int i = 0; i < 5; ++i) {
      const int at = rank * 5 + i;
      const float sum = ToFloat(ToBfloat16(value(0, at))) + ToFloat(ToBfloat16(value(1, at)));
      EXPECT_EQ(part.data<float>()[i], ToFloat(ToBfloat16(sum))) << "element " << at;
    }
  });
}

// bf16 O2 training with the dp gradients reduced in bf16, against the same
// layout reducing them in fp32, two SGD steps. The wire rounds a gradient
// twice by up to 2^-9 (each rank's part, then the mean): 0.4% of the first
// step's move. The second step's gradient is taken at parameters whose bf16
// casts may then differ by a unit (2^-8), about as much again. So each
// parameter may differ by 2% of how far it moved (measured: 0.8% at most),
// where a gradient 10% off would differ by 10%. The two must differ (the
// wire is used), every dp reduction of the plan must move bf16, and reruns
// are bit-identical.
TEST(WireDtype, Bf16ReductionFollowsFp32ReductionOnDpLayouts) {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 2;
  c.batch_size = 8;
  OptimizerConfig sgd;
  sgd.type = "sgd";
  sgd.learning_rate = 0.5f;
  struct Layout {
    int dp, pp, sharding;
  };
  for (const Layout& k : {Layout{2, 1, 0}, Layout{2, 1, 1}, Layout{2, 2, 2}, Layout{2, 1, 3}}) {
    SCOPED_TRACE(StrCat("dp=", k.dp, " pp=", k.pp, " sharding stage ", k.sharding));
    proto::Strategy strategy = MakeStrategy(k.dp, 1, k.pp, 2, "1F1B");
    if (k.sharding > 0) strategy.mutable_sharding()->set_stage(k.sharding);
    strategy.mutable_amp()->set_level("O2");
    proto::Strategy wire = strategy;
    wire.mutable_amp()->set_grad_reduce_dtype("bf16");
    ParallelTrainer::Options options;
    options.comm.timeout = std::chrono::seconds(30);
    auto fp32 = ParallelTrainer::Create(c, sgd, strategy, options);
    ASSERT_TRUE(fp32.ok()) << fp32.status();
    auto bf16 = ParallelTrainer::Create(c, sgd, wire, options);
    ASSERT_TRUE(bf16.ok()) << bf16.status();
    auto again = ParallelTrainer::Create(c, sgd, wire, options);
    ASSERT_TRUE(again.ok()) << again.status();

    int dp_reductions = 0;
    for (const RankPlan& rank : (*bf16)->plan().ranks) {
      for (const auto& [key, program] : rank.programs()) {
        for (const Op* op : program.global_block().ops()) {
          const bool dp = op->type() == "reduce_scatter" ||
                          (op->type() == "allreduce" &&
                           op->GetAttr<int32_t>("ring_id") == kDpRing &&
                           op->GetAttr<int32_t>("fetch_parts") == 0);
          if (!dp) continue;
          ++dp_reductions;
          EXPECT_EQ(op->GetAttr<std::string>(kWireDtypeAttr), "bf16") << op->Location();
        }
      }
    }
    EXPECT_GT(dp_reductions, 0);

    const TrainingState init = (*fp32)->State().value();
    for (int s = 0; s < 2; ++s) {
      ASSERT_TRUE((*fp32)->Step(s).ok());
      ASSERT_TRUE((*bf16)->Step(s).ok());
      ASSERT_TRUE((*again)->Step(s).ok());
    }
    const TrainingState a = (*fp32)->State().value(), b = (*bf16)->State().value(),
                        b2 = (*again)->State().value();
    double worst_share = 0;  // of a parameter's own movement
    for (const auto& [name, tensor] : a.parameters) {
      const std::vector<float> x = tensor.ToFloatVector();
      const std::vector<float> y = b.parameters.at(name).ToFloatVector();
      const double moved = WorstDifference(x, init.parameters.at(name).ToFloatVector());
      const double diff = WorstDifference(y, x);
      EXPECT_LE(diff, 0.02 * moved) << name << " moved " << moved;
      worst_share = std::max(worst_share, diff / moved);
      EXPECT_EQ(y, b2.parameters.at(name).ToFloatVector()) << name;
    }
    EXPECT_GT(worst_share, 0) << "reducing in bf16 changed nothing: is the wire dtype used?";
    std::printf("dp=%d pp=%d sharding %d: worst difference %.2f%% of a parameter's movement\n",
                k.dp, k.pp, k.sharding, 100 * worst_share);
  }
}

TEST(WireDtype, StrategyAllowsFp32OrTheComputeDtype) {
  proto::Strategy s;
  s.mutable_amp()->set_grad_reduce_dtype("bf16");
  Status st = AmpConfigOf(s).status();
  EXPECT_NE(st.message().find("amp.grad_reduce_dtype: 'bf16' is not fp32 (amp.level is O0"),
            std::string::npos)
      << st;
  s.mutable_amp()->set_level("O2");
  EXPECT_EQ(AmpConfigOf(s).value().grad_reduce_dtype, proto::BF16);
  s.mutable_amp()->set_grad_reduce_dtype("fp16");
  st = AmpConfigOf(s).status();
  EXPECT_NE(st.message().find("'fp16' is not fp32 or the compute dtype bf16"), std::string::npos)
      << st;
}

}  // namespace
}  // namespace loom
