// The refinement of `loom tune`'s winner (runtime/tune_refine.h): the knobs
// the search holds at their defaults, turned on its best plan. Checked
// against the simulator directly: the values it takes are the best ones
// and fit, the ones it declines stay out of the top plans, and --explain
// says what it tried.
#include "runtime/tune_refine.h"

#include <gtest/gtest.h>

#include "cost_model/cluster.h"
#include "cost_model/cost_context.h"
#include "runtime/simulation.h"
#include "runtime/tuner.h"

namespace loom {
namespace {

GptConfig FourLayers() {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.batch_size = 8;
  c.num_layers = 4;
  return c;
}

const CostContext& Local() {
  static const proto::Cluster cluster = LoadCluster("local").value();
  static const CostContext costs(cluster, CostTable());
  return costs;
}

TuneReport Tuned(const GptConfig& c, int64_t memory_limit, bool refine = true) {
  TuneOptions o;
  o.space.devices = 2;
  o.memory_limit_bytes = memory_limit;
  o.space.refine = refine;
  auto r = Tune(c, OptimizerConfig(), Local(), o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? std::move(*r) : TuneReport();
}

// The plan as the search times it, simulated again here.
SimulationResult Simulate(const GptConfig& c, const proto::Strategy& s) {
  SimulationOptions o;
  o.fold_data_parallel = true;
  o.fold_tensor_parallel = true;
  PlanOptions plan;
  plan.costs = &Local();
  auto sim = SimulateGpt(c, OptimizerConfig(), s, CostModelTimers(Local()), o, plan);
  EXPECT_TRUE(sim.ok()) << sim.status();
  return sim.ok() ? sim->result : SimulationResult();
}

const TunedPlan* Named(const TuneReport& r, const std::string& name) {
  for (const TunedPlan& p : r.simulated) {
    if (p.candidate.name == name) return &p;
  }
  return nullptr;
}

bool ExplainSays(const TuneReport& r, const std::string& text) {
  for (const std::string& line : ExplainWinner(r, TuneOptions())) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

// Under a memory limit that only recomputation meets, the search's best
// recomputes every layer; the refinement recomputes the fewest layers of
// each chunk that fit, and no fewer fit.
TEST(TuneRefine, RecomputesTheFewestLayersThatFit) {
  const GptConfig c = FourLayers();
  constexpr int64_t kLimit = 2000000;
  const TuneReport r = Tuned(c, kLimit);
  ASSERT_FALSE(r.top.empty());
  const TunedPlan& w = r.top.front();
  SCOPED_TRACE(w.candidate.name);
  const proto::RecomputeStrategy& rc = w.candidate.strategy.recompute();
  // The limit is one the search meets by recomputing every layer.
  const TunedPlan* searched = Named(r, r.search_best);
  ASSERT_NE(searched, nullptr);
  ASSERT_NE(searched->candidate.strategy.recompute().granularity(), "none");
  ASSERT_EQ(searched->candidate.strategy.recompute().num_layers(), 0);
  ASSERT_GT(rc.num_layers(), 0);
  ASSERT_LT(rc.num_layers(), c.num_layers);
  EXPECT_LE(w.step_time_s, searched->step_time_s * 0.995);
  // Each count of recomputed layers, simulated here: the winner's fits and
  // steps as the search said; every smaller count is over the limit.
  for (int layers = 1; layers < c.num_layers; ++layers) {
    proto::Strategy s = w.candidate.strategy;
    s.mutable_recompute()->set_num_layers(layers);
    const SimulationResult sim = Simulate(c, s);
    SCOPED_TRACE(layers);
    const bool fits = sim.PeakRank().peak_bytes() <= kLimit;
    if (layers < rc.num_layers()) EXPECT_FALSE(fits);
    if (layers == rc.num_layers()) {
      EXPECT_TRUE(fits);
      EXPECT_EQ(sim.step_time_s, w.step_time_s);
    }
  }
  EXPECT_TRUE(ExplainSays(r, "refined recomputed layers: the first " +
                                 std::to_string(rc.num_layers()) + " of each chunk's 4"));
}

// Without a limit on 2 ranks the search's best is data-parallel; a bucket
// size other than the cost model's steps faster on this cluster, whose
// calls cost CPU time each. The refinement takes it only for a real gain,
// and the sizes it declined are simulated but not among the top plans.
TEST(TuneRefine, TakesABucketSizeOnlyForAGain) {
  const GptConfig c = FourLayers();
  const TuneReport r = Tuned(c, 0);
  ASSERT_FALSE(r.top.empty());
  const TunedPlan& w = r.top.front();
  SCOPED_TRACE(w.candidate.name);
  const TunedPlan* searched = Named(r, r.search_best);
  ASSERT_NE(searched, nullptr);
  ASSERT_GT(searched->candidate.strategy.dp().degree(), 1);
  ASSERT_EQ(searched->candidate.strategy.dp().bucket_size_bytes(), 0);
  const int64_t bucket = w.candidate.strategy.dp().bucket_size_bytes();
  ASSERT_GT(bucket, 0);
  EXPECT_EQ(w.bucket_bytes, bucket);
  EXPECT_NE(bucket, searched->bucket_bytes);
  EXPECT_LE(w.step_time_s, searched->step_time_s * 0.995);
  EXPECT_EQ(Simulate(c, w.candidate.strategy).step_time_s, w.step_time_s);
  ASSERT_FALSE(r.declined.empty());
  for (const std::string& name : r.declined) {
    ASSERT_NE(Named(r, name), nullptr) << name;
    for (const TunedPlan& p : r.top) EXPECT_NE(p.candidate.name, name);
    // Declined: over the limit, or not 0.5% faster than the plan it would
    // have replaced, which the winner is at least as fast as.
    EXPECT_GE(Named(r, name)->step_time_s, w.step_time_s * 0.995) << name;
  }
  EXPECT_TRUE(ExplainSays(r, "refined bucket size: "));
  EXPECT_TRUE(ExplainSays(r, "the search's best, refined below: " + r.search_best));

  // Without the refinement the search's best is the winner.
  const TuneReport plain = Tuned(c, 0, /*refine=*/false);
  ASSERT_FALSE(plain.top.empty());
  EXPECT_EQ(plain.top.front().candidate.name, r.search_best);
  EXPECT_TRUE(plain.refined.empty());
  EXPECT_GT(r.simulated.size(), plain.simulated.size());
}

}  // namespace
}  // namespace loom
