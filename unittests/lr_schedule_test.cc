// Learning-rate schedules in the program (framework/lr_schedule.h): the
// formula's closed forms, the rates a trainer takes step by step, the same
// rates after a resume, and every pipeline stage updating with them.
#include <cmath>

#include <gtest/gtest.h>

#include "framework/lr_schedule.h"
#include "unittests/parameter_compare.h"

namespace loom {
namespace {

TEST(LrSchedule, WarmUpThenDecayToTheFloor) {
  LrScheduleParams p;
  p.learning_rate = 1.0f;
  p.min_learning_rate = 0.1f;
  p.warmup_steps = 4;
  p.decay_steps = 12;
  // Warm-up: the k-th step (k = completed + 1) runs at k / 4 of the peak.
  for (int64_t s = 0; s < 4; ++s) {
    EXPECT_FLOAT_EQ(ScheduledLearningRate(p, s), (s + 1) / 4.0f) << s;
  }
  p.decay = kLrConstant;
  EXPECT_FLOAT_EQ(ScheduledLearningRate(p, 100), 1.0f);
  // Cosine: half-way through the 8 decay steps, half-way between peak and
  // floor; at the end, the floor, and there it stays.
  p.decay = kLrCosine;
  EXPECT_FLOAT_EQ(ScheduledLearningRate(p, 7), 0.55f);
  EXPECT_FLOAT_EQ(ScheduledLearningRate(p, 11), 0.1f);
  EXPECT_FLOAT_EQ(ScheduledLearningRate(p, 500), 0.1f);
  EXPECT_NEAR(ScheduledLearningRate(p, 5), 0.1 + 0.9 * 0.5 * (std::cos(M_PI * 2 / 8) + 1), 1e-6);
  p.decay = kLrLinear;
  EXPECT_FLOAT_EQ(ScheduledLearningRate(p, 5), 0.1f + 0.9f * 0.75f);
  EXPECT_FLOAT_EQ(ScheduledLearningRate(p, 11), 0.1f);
  // Decay with no warm-up starts below the peak at its first step.
  p.warmup_steps = 0;
  EXPECT_FLOAT_EQ(ScheduledLearningRate(p, 0), 0.1f + 0.9f * (11.0f / 12));
}

OptimizerConfig Scheduled() {
  OptimizerConfig o;
  o.learning_rate = 1e-2f;
  o.min_learning_rate = 1e-3f;
  o.warmup_steps = 3;
  o.lr_decay = "cosine";
  o.decay_steps = 8;
  return o;
}

float Expected(const OptimizerConfig& o, int64_t step) {
  const double n = step + 1;
  if (n <= o.warmup_steps) return static_cast<float>(o.learning_rate * n / o.warmup_steps);
  if (n > o.decay_steps) return o.min_learning_rate;
  const double ratio = (n - o.warmup_steps) / (o.decay_steps - o.warmup_steps);
  return static_cast<float>(o.min_learning_rate + (o.learning_rate - o.min_learning_rate) * 0.5 *
                                                      (std::cos(M_PI * ratio) + 1));
}

TEST(LrSchedule, TheTrainerTakesEachStepsRateAndCheckpointsCarryTheCounter) {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 2;
  const OptimizerConfig o = Scheduled();
  auto straight = SerialTrainer::Create(c, o).value();
  for (int64_t s = 0; s < 10; ++s) {
    ASSERT_TRUE(straight->Step(s).ok());
    EXPECT_FLOAT_EQ(straight->LastLearningRate(), Expected(o, s)) << "step " << s;
  }
  // Four steps, then the state into a fresh trainer: the counter comes
  // with it, so the rest of the run takes the same rates and ends on the
  // same bits.
  auto first = SerialTrainer::Create(c, o).value();
  for (int64_t s = 0; s < 4; ++s) ASSERT_TRUE(first->Step(s).ok());
  const TrainingState state = first->State().value();
  ASSERT_EQ(state.optimizer.count(kLrStepVar), 1u);
  EXPECT_EQ(state.optimizer.at(kLrStepVar).ToInt64Vector(), std::vector<int64_t>{4});
  auto resumed = SerialTrainer::Create(c, o).value();
  ASSERT_TRUE(resumed->SetState(state, "four steps").ok());
  for (int64_t s = 4; s < 10; ++s) {
    ASSERT_TRUE(resumed->Step(s).ok());
    EXPECT_FLOAT_EQ(resumed->LastLearningRate(), Expected(o, s)) << "step " << s;
  }
  const TrainingState a = straight->State().value(), b = resumed->State().value();
  for (const auto& [name, t] : a.parameters) {
    EXPECT_EQ(t.ToFloatVector(), b.parameters.at(name).ToFloatVector()) << name;
  }
}

TEST(LrSchedule, EveryPipelineStageUpdatesAtTheScheduledRate) {
  // Each stage has its own optimizer ops and its own copy of the rate:
  // were the schedule on one stage only, the other would update at the
  // peak throughout and its parameters would leave serial training's.
  // SGD (as the parity tests use): AdamW would hide a wrong rate behind
  // its normalization.
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 4;
  c.batch_size = 8;
  OptimizerConfig o = Scheduled();
  o.type = "sgd";
  o.learning_rate = 0.5f;
  o.min_learning_rate = 0.05f;
  auto serial = SerialTrainer::Create(c, o).value();
  ParallelTrainer::Options options;
  options.comm.timeout = std::chrono::seconds(30);
  auto t = ParallelTrainer::Create(c, o, MakeStrategy(2, 1, 2, 2, "1F1B"), options);
  ASSERT_TRUE(t.ok()) << t.status();
  for (int64_t s = 0; s < 5; ++s) {
    ASSERT_TRUE(serial->Step(s).ok());
    ASSERT_TRUE((*t)->Step(s).ok());
    for (int r : (*t)->local_ranks()) {
      EXPECT_FLOAT_EQ(LearningRateIn((*t)->rank_scope(r)), Expected(o, s))
          << "rank " << r << ", step " << s;
    }
  }
  EXPECT_GE(ExpectEveryParameterMatches(**t, *serial, 2e-5), 2 * 12 + 4);
}

}  // namespace
}  // namespace loom
