// A plan's ops timed for the cost table (profiling/plan_op_profile.h), as
// `loom profile` and `loom tune --profile_ops` time them.
#include "profiling/plan_op_profile.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "models/gpt.h"
#include "passes/strategy.h"
#include "runtime/gpt_plan.h"
#include "unittests/test_plan_options.h"

namespace loom {
namespace {

// loom tune --profile_ops times its plans in rounds: each round a share of
// the steps, the median round kept, every round's samples counted.
TEST(PlanOpProfile, PlansInRoundsKeepEveryRoundsSamples) {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 2;
  const Plan pipeline =
      PlanGpt(c, OptimizerConfig(), MakeStrategy(1, 1, 2, 2, "1F1B"), {}, LocalPlanOptions())
          .value();
  const Plan data =
      PlanGpt(c, OptimizerConfig(), MakeStrategy(2, 1, 1, 1, "1F1B"), {}, LocalPlanOptions())
          .value();
  PlanOpProfileOptions o;
  o.step.warmup_steps = 1;
  o.step.steps = 6;
  o.step.side_by_side = 1;
  std::vector<std::pair<int, size_t>> progress;
  const std::vector<PlanOpProfile> profiles =
      ProfilePlansInRounds(c, {&pipeline, &data}, 3, o, [&](int round, size_t plan) {
        progress.emplace_back(round, plan);
      }).value();
  // The plans in turns, round after round.
  EXPECT_EQ(progress,
            (std::vector<std::pair<int, size_t>>{{0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 0}, {2, 1}}));
  ASSERT_EQ(profiles.size(), 2u);
  ASSERT_TRUE(profiles[0].in_step.has_value());
  std::map<std::string, int> samples_of_type;
  for (const OpTiming& t : profiles[0].in_step->timings) {
    EXPECT_GT(t.median_seconds, 0) << t.signature;
    samples_of_type[t.type] = t.samples;
  }
  // Two steps a round, as in profile_test.cc's InStepTimesThePipelineStagesInTurns,
  // three times over.
  EXPECT_EQ(samples_of_type["lookup_table"], 6);
  EXPECT_EQ(samples_of_type["matmul"], 12);
  EXPECT_FALSE(ProfilePlansInRounds(c, {&data}, 0, o).ok());
}

}  // namespace
}  // namespace loom
