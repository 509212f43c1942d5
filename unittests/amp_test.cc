// The AMP rewrite (passes/amp.h): which ops compute in which dtype at O1 and
// O2, that the program stays valid and its optimizer intact, that serial
// bf16 training follows fp32 training, and every layout serial bf16
// training. The weights' low-precision copies are low_precision_weights_test.cc's.
#include "passes/amp.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "cost_model/cluster.h"
#include "cost_model/cost_context.h"
#include "framework/op_registry.h"
#include "framework/shape_inference.h"
#include "framework/verifier.h"
#include "models/gpt.h"
#include "passes/planner.h"
#include "runtime/serial_trainer.h"
#include "runtime/simulation.h"
#include "unittests/layout_sweep.h"
#include "unittests/parameter_compare.h"
#include "unittests/test_plan_options.h"

namespace loom {
namespace {

GptConfig Tiny() { return GptPreset("gpt-tiny").value(); }

TrainingProgram Build(const GptConfig& c) {
  return BuildGptTrainingProgram(c, OptimizerConfig()).value();
}

DataType DtypeOf(const Block& b, const std::string& var) { return b.FindVar(var)->dtype(); }

struct OpCensus {
  int casts = 0;
  int low_matmuls = 0, fp32_matmuls = 0;
  int low_grad_matmuls = 0;
  int low_layer_norms = 0;
  int updates = 0;
};

OpCensus Count(const Block& b, DataType low) {
  OpCensus c;
  for (const Op* op : b.ops()) {
    if (op->type() == "cast") ++c.casts;
    if (op->type() == "matmul") {
      (DtypeOf(b, op->Output("Out")) == low ? c.low_matmuls : c.fp32_matmuls) += 1;
    }
    if (op->type() == "matmul_grad" && DtypeOf(b, op->Input("Out@GRAD")) == low) {
      ++c.low_grad_matmuls;
    }
    if (op->type() == "layer_norm" && DtypeOf(b, op->Output("Y")) == low) ++c.low_layer_norms;
    if (op->HasRole(role::kOptimize)) ++c.updates;
  }
  return c;
}

TEST(Amp, O1ComputesGemmsLowAndTheLossInFp32) {
  TrainingProgram tp = Build(Tiny());
  const OpCensus before = Count(tp.main.global_block(), proto::BF16);
  ASSERT_TRUE(ApplyAmp(tp.main, {1, proto::BF16}).ok());
  const Block& b = tp.main.global_block();
  ASSERT_TRUE(VerifyProgram(tp.main).ok()) << VerifyProgram(tp.main);
  const OpCensus after = Count(b, proto::BF16);
  EXPECT_EQ(after.fp32_matmuls, 0);
  EXPECT_EQ(after.low_matmuls, before.fp32_matmuls);
  // Every matmul's backward runs on the bf16 gradient of its output.
  EXPECT_EQ(after.low_grad_matmuls, after.low_matmuls);
  EXPECT_GT(after.casts, 0);
  EXPECT_EQ(after.updates, before.updates);
  // The loss and its cross entropy stay fp32; so do parameters and their
  // gradients (the master weights), and layer norm's affine parameters.
  EXPECT_EQ(DtypeOf(b, kLossVar), proto::FP32);
  for (const Op* op : b.ops()) {
    if (op->type() == "softmax_with_cross_entropy") {
      EXPECT_EQ(DtypeOf(b, op->Input("Logits")), proto::FP32);
    }
    if (op->type() == "layer_norm") {
      EXPECT_EQ(DtypeOf(b, op->Input("Scale")), proto::FP32);
      EXPECT_EQ(DtypeOf(b, op->Output("Mean")), proto::FP32);
    }
  }
  for (const auto& [name, var] : b.vars()) {
    if (var.is_parameter()) {
      EXPECT_EQ(var.dtype(), proto::FP32) << name;
      EXPECT_EQ(DtypeOf(b, GradVarName(name)), proto::FP32) << name;
    }
  }
}

TEST(Amp, O2ComputesEveryOpButTheLossLow) {
  TrainingProgram o1 = Build(Tiny());
  TrainingProgram o2 = Build(Tiny());
  ASSERT_TRUE(ApplyAmp(o1.main, {1, proto::BF16}).ok());
  ASSERT_TRUE(ApplyAmp(o2.main, {2, proto::BF16}).ok());
  ASSERT_TRUE(VerifyProgram(o2.main).ok()) << VerifyProgram(o2.main);
  const Block& b = o2.main.global_block();
  // O1 runs the first layer norm (on the fp32 embedding sum) in fp32; O2
  // runs every layer norm in bf16 from the embedding on.
  int layer_norms = 0;
  for (const Op* op : b.ops()) layer_norms += op->type() == "layer_norm";
  EXPECT_EQ(Count(b, proto::BF16).low_layer_norms, layer_norms);
  EXPECT_LT(Count(o1.main.global_block(), proto::BF16).low_layer_norms, layer_norms);
  for (const Op* op : b.ops()) {
    if (op->type() == "lookup_table") {
      EXPECT_EQ(DtypeOf(b, op->Output("Out")), proto::BF16);
    }
  }
  EXPECT_EQ(DtypeOf(b, kLossVar), proto::FP32);
}

TEST(Amp, ParametersAreCastWhereTheyAreRead) {
  // A parameter read by two ops gets a cast before each, so that each cast
  // lands in its reader's pipeline stage; the tied embedding is read by the
  // lookup (first stage) and the head (last).
  GptConfig c = Tiny();
  ASSERT_TRUE(c.tie_embeddings);
  TrainingProgram tp = Build(c);
  ASSERT_TRUE(ApplyAmp(tp.main, {2, proto::BF16}).ok());
  const Block& b = tp.main.global_block();
  std::vector<Op*> ops = b.OpVector();
  int casts_of_embedding = 0;
  for (size_t i = 0; i + 1 < ops.size(); ++i) {
    if (ops[i]->type() != "cast" || !ops[i]->HasRole(role::kForward)) continue;
    const proto::VarDesc* x = b.FindVar(ops[i]->Input("X"));
    if (!x->is_parameter()) continue;
    // The op right after a parameter's cast reads it.
    const auto& reads = ops[i + 1]->InputVars();
    EXPECT_NE(std::find(reads.begin(), reads.end(), ops[i]->Output("Out")), reads.end())
        << ops[i]->Location() << " casts " << x->name() << " for " << ops[i + 1]->Location();
    casts_of_embedding += ops[i]->Input("X") == "embed.tokens.weight";
  }
  EXPECT_EQ(casts_of_embedding, 2);
}

TEST(Amp, RejectsBadLevelsAndDtypes) {
  EXPECT_EQ(ParseAmpLevel("O3").status().message(), "AMP level 'O3' is not one of O0, O1, O2");
  EXPECT_EQ(ParseAmpDtype("fp8").status().message(), "AMP dtype 'fp8' is not one of bf16, fp16");
  TrainingProgram tp = Build(Tiny());
  EXPECT_FALSE(ApplyAmp(tp.main, {2, proto::FP32}).ok());
  EXPECT_FALSE(ApplyAmp(tp.main, {3, proto::BF16}).ok());
}

// The mean loss of steps [from, to).
double MeanLoss(SerialTrainer& t, int from, int to) {
  double sum = 0;
  for (int s = from; s < to; ++s) sum += t.Step(s).value();
  return sum / (to - from);
}

TEST(Amp, Bf16O2TrainingFollowsFp32) {
  // 300 steps of gpt-tiny: the loss curves must end within 2% of each other
  // (compared over the last 20 steps, as one step's loss is noisy), while
  // bf16 must really differ from fp32 in its first step.
  const GptConfig c = Tiny();
  auto fp32 = SerialTrainer::Create(c, OptimizerConfig()).value();
  auto bf16 = SerialTrainer::Create(c, OptimizerConfig(), nullptr, {2, proto::BF16}).value();
  const float first32 = fp32->Step(0).value();
  const float first16 = bf16->Step(0).value();
  EXPECT_NE(first32, first16);
  EXPECT_NEAR(first16, first32, 0.01 * first32);
  MeanLoss(*fp32, 1, 280);
  MeanLoss(*bf16, 1, 280);
  const double end32 = MeanLoss(*fp32, 280, 300);
  const double end16 = MeanLoss(*bf16, 280, 300);
  std::printf("first step: fp32 %.6f, bf16 O2 %.6f; steps 280-299: fp32 %.4f, bf16 O2 %.4f\n",
              first32, first16, end32, end16);
  EXPECT_LT(end32, first32 * 0.8) << "fp32 did not learn";
  EXPECT_NEAR(end16, end32, 0.02 * end32) << "fp32 " << end32 << ", bf16 O2 " << end16;
}

// The strategy's precision reaches every planned program, GPT preset or
// not: PlanRanks and PlanRank rewrite what they are given.
TEST(Amp, PlanningAnyProgramAppliesTheStrategysPrecision) {
  TrainingProgram tp = Build(Tiny());
  proto::Strategy strategy = MakeStrategy(1, 2, 1, 1, "1F1B");
  strategy.mutable_amp()->set_level("O2");
  auto count_low_matmuls = [](const RankPlan& rp) {
    int low = 0;
    for (const auto& [key, program] : rp.programs()) {
      const Block& b = program.global_block();
      for (const Op* op : b.ops()) {
        low += op->type() == "matmul" && DtypeOf(b, op->Output("Out")) == proto::BF16;
      }
    }
    return low;
  };
  auto plan = PlanRanks(tp.main, tp.startup, strategy, {}, LocalPlanOptions());
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto one = PlanRank(tp.main, tp.startup, strategy, 1, LocalPlanOptions());
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_GT(count_low_matmuls(plan->ranks[0]), 0);
  EXPECT_EQ(count_low_matmuls(*one), count_low_matmuls(plan->ranks[1]));
  strategy.mutable_amp()->set_level("O4");
  EXPECT_EQ(PlanRanks(tp.main, tp.startup, strategy, {}, LocalPlanOptions()).status().message(),
            "amp.level: AMP level 'O4' is not one of O0, O1, O2");
}

// Every layout of a bf16 O2 program against serial bf16 O2 training. The
// parameters (fp32 master weights) cannot match bit for bit: a layout
// rounds to bf16 where serial training does not (a tensor-parallel partial
// product before its all-reduce; a micro-batch's weight gradient before
// they are summed in fp32), each rounding off by up to 2^-9 of its value.
// With SGD at rate 0.5 over two steps that moved parameters by at most
// 1.9e-4 (dp=2), 2.5e-4 (pp=2) and 5.2e-4 (mp=2) here, so the bound is
// 2e-3; a gradient 10% off (a rate of 0.55) already moves one past it.
// Reruns of one layout are bit-identical.
TEST(Amp, Bf16LayoutsFollowSerialBf16) {
  GptConfig c = Tiny();
  c.num_layers = 4;
  c.batch_size = 8;
  OptimizerConfig sgd;
  sgd.type = "sgd";
  sgd.learning_rate = 0.5f;
  const AmpConfig amp{2, proto::BF16};
  struct Layout {
    int dp, mp, pp;
    const char* schedule;
    int sharding = 0;
    bool op_split = false;
    int vpp = 1;
  };
  // VPP: two chunks of one layer on each stage, each chunk's weights cast
  // into one bf16 copy (low-precision-weights) by its own chunk's update.
  for (const Layout& k : {Layout{2, 1, 1, "1F1B"}, Layout{1, 2, 1, "1F1B"},
                          Layout{1, 1, 2, "1F1B"}, Layout{1, 2, 2, "ZBH1"},
                          Layout{2, 1, 2, "1F1B", 1}, Layout{2, 1, 2, "1F1B", 2},
                          Layout{2, 1, 2, "1F1B", 3}, Layout{1, 2, 1, "FThenB", 0, true},
                          Layout{1, 2, 2, "VPP", 0, false, 2}}) {
    SCOPED_TRACE(StrCat(k.schedule, " dp=", k.dp, " mp=", k.mp, " pp=", k.pp,
                        k.vpp > 1 ? StrCat(" vpp=", k.vpp) : "",
                        k.sharding > 0 ? StrCat(" sharding stage ", k.sharding) : "",
                        k.op_split ? " op-split" : ""));
    auto serial = SerialTrainer::Create(c, sgd, nullptr, amp).value();
    proto::Strategy strategy = MakeStrategy(k.dp, k.mp, k.pp, 2, k.schedule, k.vpp);
    if (k.sharding > 0) strategy.mutable_sharding()->set_stage(k.sharding);
    if (k.op_split) {
      strategy.mutable_passes()->set_op_split(true);
      strategy.mutable_passes()->set_op_split_parts(2);
    }
    strategy.mutable_amp()->set_level("O2");
    ParallelTrainer::Options options;
    options.comm.timeout = std::chrono::seconds(30);
    auto t = ParallelTrainer::Create(c, sgd, strategy, options);
    ASSERT_TRUE(t.ok()) << t.status();
    auto again = ParallelTrainer::Create(c, sgd, strategy, options);
    ASSERT_TRUE(again.ok()) << again.status();
    for (int s = 0; s < 2; ++s) {
      ASSERT_TRUE(serial->Step(s).ok());
      ASSERT_TRUE((*t)->Step(s).ok());
      ASSERT_TRUE((*again)->Step(s).ok());
    }
    EXPECT_GE(ExpectEveryParameterMatches(**t, *serial, 2e-3), 4 * 12 / k.pp);
    const TrainingState a = (*t)->State().value(), b = (*again)->State().value();
    for (const auto& [name, tensor] : a.parameters) {
      EXPECT_EQ(tensor.ToFloatVector(), b.parameters.at(name).ToFloatVector()) << name;
    }
  }
}

}  // namespace
}  // namespace loom
