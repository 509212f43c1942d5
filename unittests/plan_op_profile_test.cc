// A plan's ops timed for the cost table (profiling/plan_op_profile.h), as
// `loom profile` and `loom tune --profile_ops` time them.
#include "profiling/plan_op_profile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "models/gpt.h"
#include "passes/strategy.h"
#include "runtime/gpt_plan.h"
#include "unittests/test_plan_options.h"

namespace loom {
namespace {

// A profile's seconds: each op timed in steps as often as a step runs it,
// each op timed alone once (its runs a sample only outlast the clock).
TEST(PlanOpProfile, ProfiledSecondsCountsAStepsRunsOfEachOp) {
  PlanOpProfile p;
  EXPECT_EQ(ProfiledSeconds(p), 0);
  p.in_step.emplace();
  OpTiming matmul;
  matmul.median_seconds = 1e-3;
  matmul.runs_per_sample = 3;
  OpTiming once;
  once.median_seconds = 2e-3;
  once.runs_per_sample = 1;
  p.in_step->timings = {matmul, once};
  OpTiming alone;
  alone.median_seconds = 4e-3;
  alone.runs_per_sample = 50;
  p.alone.timed = {alone};
  EXPECT_DOUBLE_EQ(ProfiledSeconds(p), 3e-3 + 2e-3 + 4e-3);
}

// loom tune --profile_ops times its plans in rounds: each round a share of
// the steps (rounded up), and each plan keeps its fastest round whole.
TEST(PlanOpProfile, PlansInRoundsKeepEachPlansFastestRound) {
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
  o.step.steps = 5;  // two a round over three rounds
  o.step.side_by_side = 1;
  std::vector<std::pair<int, size_t>> progress;
  const RoundsProfile profiles =
      ProfilePlansInRounds(c, {&pipeline, &data}, 3, o, [&](int round, size_t plan) {
        progress.emplace_back(round, plan);
      }).value();
  // The plans in turns, round after round.
  EXPECT_EQ(progress,
            (std::vector<std::pair<int, size_t>>{{0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 0}, {2, 1}}));
  ASSERT_EQ(profiles.fastest.size(), 2u);
  ASSERT_EQ(profiles.round_seconds.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const std::vector<double>& rounds = profiles.round_seconds[i];
    ASSERT_EQ(rounds.size(), 3u);
    for (double s : rounds) EXPECT_GT(s, 0);
    // The round kept is the fastest of the three, whole.
    EXPECT_DOUBLE_EQ(ProfiledSeconds(profiles.fastest[i]),
                     *std::min_element(rounds.begin(), rounds.end()));
  }
  ASSERT_TRUE(profiles.fastest[0].in_step.has_value());
  std::map<std::string, int> samples_of_type;
  for (const OpTiming& t : profiles.fastest[0].in_step->timings) {
    EXPECT_GT(t.median_seconds, 0) << t.signature;
    samples_of_type[t.type] = t.samples;
  }
  // One round's two steps, as in profile_test.cc's
  // InStepTimesThePipelineStagesInTurns: no other round's samples mixed in.
  EXPECT_EQ(samples_of_type["lookup_table"], 2);
  EXPECT_EQ(samples_of_type["matmul"], 4);
  EXPECT_FALSE(ProfilePlansInRounds(c, {&data}, 0, o).ok());
}

}  // namespace
}  // namespace loom
