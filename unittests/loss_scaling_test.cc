// fp16 dynamic loss scaling (passes/amp.h, framework/grad_clip.h): the
// program's state and ops, the scale's halving and growth, and a forced
// overflow skipped on every rank of a dp2 mp2 pp2 run with parameters and
// optimizer state left as they were.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "framework/grad_clip.h"
#include "framework/op_builder.h"
#include "passes/amp.h"
#include "unittests/op_runner.h"
#include "unittests/parameter_compare.h"

namespace loom {
namespace {

GptConfig SmallGpt() {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 4;
  c.batch_size = 8;
  return c;
}

AmpConfig Fp16(float init_loss_scale) {
  AmpConfig amp{2, proto::FP16};
  amp.init_loss_scale = init_loss_scale;
  return amp;
}

TEST(LossScaling, Fp16ProgramsSeedTheLossGradientWithACheckpointedScale) {
  TrainingProgram tp = BuildGptTrainingProgram(SmallGpt(), OptimizerConfig()).value();
  ASSERT_TRUE(ApplyAmp(tp.main, Fp16(1024), &tp.startup).ok());
  const Block& b = tp.main.global_block();
  int seeds = 0, updates = 0, unscaled = 0, scale_updates = 0;
  for (const Op* op : b.ops()) {
    if (op->type() == "elementwise_mul" && op->HasRole(role::kLoss)) {
      ++seeds;
      EXPECT_EQ(op->Input("Y"), kLossScaleVar);
    }
    if (IsParameterUpdate(*op)) {
      ++updates;
      unscaled += op->HasInput("GradScale");
    }
    if (op->type() == "grad_scale") {
      EXPECT_EQ(op->Input("LossScale"), kLossScaleVar);
    }
    scale_updates += op->type() == "update_loss_scale";
  }
  EXPECT_EQ(seeds, 1);
  EXPECT_EQ(unscaled, updates);
  EXPECT_EQ(scale_updates, 1);
  const std::set<std::string> state = OptimizerStateVars(b);
  EXPECT_EQ(state.count(kLossScaleVar), 1u);
  EXPECT_EQ(state.count(kLossScaleGoodStepsVar), 1u);
  EXPECT_TRUE(tp.startup.global_block().HasVar(kLossScaleVar));
  // bf16 has fp32's range: no scaling.
  TrainingProgram bf16 = BuildGptTrainingProgram(SmallGpt(), OptimizerConfig()).value();
  ASSERT_TRUE(ApplyAmp(bf16.main, {2, proto::BF16}, &bf16.startup).ok());
  EXPECT_FALSE(bf16.main.global_block().HasVar(kLossScaleVar));
  // fp16 needs the startup program to hold the scale.
  TrainingProgram bare = BuildGptTrainingProgram(SmallGpt(), OptimizerConfig()).value();
  EXPECT_EQ(ApplyAmp(bare.main, Fp16(1024)).message(),
            "fp16 training scales its loss, whose state the startup program must initialize, "
            "but none was given");
}

TEST(LossScaling, TheScaleHalvesOnOverflowAndDoublesAfterTheGrowthInterval) {
  auto step = [](float squared, float scale, int64_t good) {
    proto::OpDesc op = OpDescBuilder("update_loss_scale")
                           .Input("SquaredNorm", "sq")
                           .Input("LossScale", "s")
                           .Input("GoodSteps", "g")
                           .Output("LossScaleOut", "s2")
                           .Output("GoodStepsOut", "g2")
                           .Attr("growth_interval", int64_t{3})
                           .Build();
    Tensor sq(TensorMeta{proto::FP32, {1}}), s(TensorMeta{proto::FP32, {1}}),
        g(TensorMeta{proto::INT64, {1}});
    sq.data<float>()[0] = squared;
    s.data<float>()[0] = scale;
    g.data<int64_t>()[0] = good;
    auto out = testing::TryRunOp(op, {{"sq", sq}, {"s", s}, {"g", g}}, {"s2", "g2"}).value();
    return std::pair{out.at("s2").data<float>()[0], out.at("g2").data<int64_t>()[0]};
  };
  EXPECT_EQ(step(std::numeric_limits<float>::infinity(), 65536, 2), std::pair(32768.0f, int64_t{0}));
  EXPECT_EQ(step(NAN, 65536, 0), std::pair(32768.0f, int64_t{0}));
  EXPECT_EQ(step(4, 65536, 0), std::pair(65536.0f, int64_t{1}));
  EXPECT_EQ(step(4, 65536, 2), std::pair(131072.0f, int64_t{0}));
}

// A loss scale of 1e30 overflows fp16 in the first backward op: the step
// must be skipped on every rank (parameters, moments and beta powers
// untouched), every rank's scale must halve, and the next step, still
// overflowing, halves it again.
TEST(LossScaling, AForcedOverflowIsSkippedOnEveryRank) {
  const GptConfig c = SmallGpt();
  proto::Strategy strategy = MakeStrategy(2, 2, 2, 2, "1F1B");
  strategy.mutable_amp()->set_level("O2");
  strategy.mutable_amp()->set_dtype("fp16");
  strategy.mutable_amp()->set_init_loss_scale(1e30f);
  ParallelTrainer::Options options;
  options.comm.timeout = std::chrono::seconds(30);
  auto t = ParallelTrainer::Create(c, OptimizerConfig(), strategy, options);
  ASSERT_TRUE(t.ok()) << t.status();
  const TrainingState before = (*t)->State().value();
  ASSERT_TRUE((*t)->Step(0).ok());
  EXPECT_FALSE(std::isfinite((*t)->LastGradNorm()));
  const TrainingState after = (*t)->State().value();
  ASSERT_EQ(after.parameters.size(), before.parameters.size());
  for (const auto& [name, tensor] : before.parameters) {
    EXPECT_EQ(after.parameters.at(name).ToFloatVector(), tensor.ToFloatVector()) << name;
  }
  int compared = 0;
  for (const auto& [name, tensor] : before.optimizer) {
    if (name == kLossScaleVar || name == kLossScaleGoodStepsVar || name == kLrStepVar) continue;
    EXPECT_EQ(after.optimizer.at(name).ToFloatVector(), tensor.ToFloatVector()) << name;
    ++compared;
  }
  EXPECT_GT(compared, 100);  // moments and beta powers of every parameter
  for (int r : (*t)->local_ranks()) {
    EXPECT_EQ(HostScalarIn((*t)->rank_scope(r), kLossScaleVar), 5e29f) << "rank " << r;
  }
  ASSERT_TRUE((*t)->Step(1).ok());
  for (int r : (*t)->local_ranks()) {
    EXPECT_EQ(HostScalarIn((*t)->rank_scope(r), kLossScaleVar), 2.5e29f) << "rank " << r;
  }
}

// At a scale fp16 holds, every layout trains as serial fp16 does, and the
// loss follows fp32's. The bound is the bf16 test's (amp_test.cc): fp16
// rounds finer, to 2^-11.
TEST(LossScaling, Fp16LayoutsFollowSerialFp16) {
  GptConfig c = SmallGpt();
  OptimizerConfig sgd;
  sgd.type = "sgd";
  sgd.learning_rate = 0.5f;
  sgd.clip_grad_norm = 1.0f;
  auto serial = SerialTrainer::Create(c, sgd, nullptr, Fp16(1024)).value();
  auto fp32 = SerialTrainer::Create(c, sgd).value();
  proto::Strategy strategy = MakeStrategy(2, 2, 2, 2, "1F1B");
  strategy.mutable_amp()->set_level("O2");
  strategy.mutable_amp()->set_dtype("fp16");
  strategy.mutable_amp()->set_init_loss_scale(1024);
  ParallelTrainer::Options options;
  options.comm.timeout = std::chrono::seconds(30);
  auto t = ParallelTrainer::Create(c, sgd, strategy, options);
  ASSERT_TRUE(t.ok()) << t.status();
  for (int s = 0; s < 2; ++s) {
    const float want = serial->Step(s).value();
    const float want32 = fp32->Step(s).value();
    auto loss = (*t)->Step(s);
    ASSERT_TRUE(loss.ok()) << loss.status();
    EXPECT_NEAR(*loss, want, 1e-3 * want) << "step " << s;
    EXPECT_NEAR(want, want32, 5e-3 * want32) << "step " << s;
    EXPECT_NEAR((*t)->LastGradNorm(), serial->LastGradNorm(), 1e-3 * serial->LastGradNorm());
  }
  EXPECT_GE(ExpectEveryParameterMatches(**t, *serial, 2e-3), 4 * 12 / 2);
}

}  // namespace
}  // namespace loom
