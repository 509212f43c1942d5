// Which reads miss the cache (scheduler/cold_inputs.h), on gpt-tiny's real
// pipelined plans; how the in-step profile records them and the cost-model
// timer prices them; the cache sysfs names.
#include "scheduler/cold_inputs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>

#include "cost_model/cluster.h"
#include "cost_model/op_cost_model.h"
#include "models/gpt.h"
#include "passes/strategy.h"
#include "profiling/cache_profile.h"
#include "profiling/step_profiler.h"
#include "runtime/cost_model_timer.h"
#include "runtime/gpt_plan.h"
#include "scheduler/execution_graph.h"
#include "unittests/loom_cli.h"
#include "unittests/test_plan_options.h"

namespace loom {
namespace {

ExecutionGraph PipelineOf(const std::string& schedule) {
  const GptConfig config = GptPreset("gpt-tiny").value();
  const Plan plan =
      PlanGpt(config, OptimizerConfig(), MakeStrategy(1, 1, 2, 4, schedule), {}, LocalPlanOptions())
          .value();
  return LowerPlan(plan).value();
}

// Stage 0's activations of one micro-batch.
int64_t ActivationsOfOneMicroBatch(const RankGraphBody& body) {
  int64_t bytes = 0;
  for (const Temporary& t : body.temporaries) {
    if (t.kind == MemoryKind::kActivation && t.micro_batch == 0) bytes += t.bytes;
  }
  return bytes;
}

int64_t Total(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{0});
}

TEST(ColdInputs, NoneWithoutACacheOrInsideOneThatHoldsTheStep) {
  const ExecutionGraph graph = PipelineOf("FThenB");
  const RankGraphBody& body = *graph.ranks[0].body;
  EXPECT_EQ(Total(ColdInputBytes(body, 0)), 0);
  EXPECT_EQ(Total(ColdInputBytes(body, int64_t{1} << 40)), 0);
  EXPECT_EQ(ColdInputBytes(body, 1).size(), body.instructions.size());
}

// FThenB's stage 0 makes every micro-batch's activations before its first
// backward reads any; 1F1B's reads each after at most one more micro-batch.
// With room for one and a half micro-batches' activations, FThenB's
// backward reads more than a micro-batch's more past the cache, and only
// backward jobs read any.
TEST(ColdInputs, FThenBReadsMorePastTheCacheThan1F1B) {
  const ExecutionGraph fthenb = PipelineOf("FThenB");
  const ExecutionGraph one_f_one_b = PipelineOf("1F1B");
  const RankGraphBody& body = *fthenb.ranks[0].body;
  const int64_t cache = ActivationsOfOneMicroBatch(body) * 3 / 2;
  ASSERT_GT(cache, 0);
  const std::vector<int64_t> cold = ColdInputBytes(body, cache);
  const int64_t cold_1f1b = Total(ColdInputBytes(*one_f_one_b.ranks[0].body, cache));
  EXPECT_GT(Total(cold) - cold_1f1b, ActivationsOfOneMicroBatch(body));
  for (const Instruction& ins : body.instructions) {
    if (cold[ins.id] == 0) continue;
    EXPECT_EQ(ins.job.type, JobType::kBackward) << "instruction " << ins.id << " " << ins.op_type;
    int64_t touched = 0;
    for (int k = 0; k < ins.touches_count; ++k) {
      touched += body.temporaries[body.touches[ins.touches_begin + k]].bytes;
    }
    EXPECT_LE(cold[ins.id], touched) << "instruction " << ins.id;
  }
  // Its micro-batches 0 and 1 are read past the cache, the last one not.
  int64_t last = 0;
  for (const Instruction& ins : body.instructions) {
    if (ins.job.micro_batch == 3) last += cold[ins.id];
  }
  EXPECT_EQ(last, 0);
}

// A profiled op costs its price plus what it reads past its rank's share
// of the cache beyond what it did where profiled, at the device's rate.
TEST(ColdInputs, TheTimerPricesBytesReadPastTheCacheOverTheProfiles) {
  const ExecutionGraph graph = PipelineOf("FThenB");
  const RankGraph& rank = graph.ranks[0];
  const RankGraphBody& body = *rank.body;
  proto::Cluster local = LoadCluster("local").value();
  local.mutable_shared_host()->set_lockstep_slowdown(1);
  // Two ranks share the cache: each has half.
  const int64_t share = ActivationsOfOneMicroBatch(body) * 3 / 2;
  const std::vector<int64_t> cold = ColdInputBytes(body, share);
  const Instruction* read = nullptr;
  for (const Instruction& ins : body.instructions) {
    if (ins.kind == InstructionKind::kCompute && cold[ins.id] > 0) {
      read = &ins;
      break;
    }
  }
  ASSERT_NE(read, nullptr);
  CostTable table;
  proto::CostEntry e;
  e.set_signature(body.signatures[read->signature]);
  e.set_op_type(read->op_type);
  e.set_device(local.name());
  e.set_median_seconds(1e-3);
  e.set_samples(3);
  e.set_context("step");
  e.set_cold_input_bytes(1000);
  table.Merge({e});
  auto seconds = [&](const proto::Cluster& cluster) {
    const OpCostModel ops(cluster, table);
    auto timer = CostModelTimer::Create(graph, CostContext(cluster, ops));
    EXPECT_TRUE(timer.ok()) << timer.status();
    return timer.ok() ? (*timer)->Seconds(rank, *read) : -1.0;
  };
  EXPECT_DOUBLE_EQ(seconds(local), 1e-3);  // no cache in the cluster: as profiled
  proto::Cluster cached = local;
  cached.mutable_device()->set_cache_bytes(2 * share);
  cached.mutable_device()->set_uncached_read_seconds_per_byte(1e-10);
  ASSERT_TRUE(ValidateCluster(cached).ok());
  EXPECT_NEAR(seconds(cached), 1e-3 + (cold[read->id] - 1000) * 1e-10, 1e-12);
  // One field without the other is a one-line error naming both.
  proto::Cluster half = local;
  half.mutable_device()->set_cache_bytes(share);
  EXPECT_EQ(ValidateCluster(half).message(),
            "device.cache_bytes and device.uncached_read_seconds_per_byte go together; the "
            "cluster has only cache_bytes");
}

// The largest cache level sysfs lists, whatever order its entries come in.
TEST(ColdInputs, LastLevelCacheFromSysfs) {
  const std::string cpu = MakeTempDir("loom_sysfs_cpu0");
  auto cache = [&](const std::string& index, int level, const std::string& size) {
    std::filesystem::create_directories(cpu + "/cache/" + index);
    std::ofstream(cpu + "/cache/" + index + "/level") << level << "\n";
    std::ofstream(cpu + "/cache/" + index + "/size") << size << "\n";
  };
  EXPECT_EQ(LastLevelCacheBytes(cpu).status().message(),
            cpu + "/cache lists no cache sizes");
  cache("index3", 3, "32768K");
  cache("index0", 1, "48K");
  cache("index2", 2, "1M");
  EXPECT_EQ(LastLevelCacheBytes(cpu).value(), int64_t{32} << 20);
}

// Each op's timing in steps records the bytes it read past the rank's
// share of the cache: none within a share that holds the step, some
// within one byte, unrecorded without a share.
TEST(ColdInputs, TheInStepProfileRecordsWhatOpsReadPastTheCache) {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 2;
  const Plan plan =
      PlanGpt(c, OptimizerConfig(), MakeStrategy(1, 1, 2, 4, "FThenB"), {}, LocalPlanOptions())
          .value();
  auto cold_bytes = [&](int64_t share) {
    StepProfileOptions o;
    o.warmup_steps = 0;
    o.steps = 1;
    o.side_by_side = 1;
    o.shared_core_steps = 0;
    o.cache_share = share;
    const InStepProfile profile = ProfileInStep(c, plan, o).value();
    std::vector<double> cold;
    for (const OpTiming& t : profile.timings) cold.push_back(t.cold_input_bytes);
    return cold;
  };
  for (double b : cold_bytes(0)) EXPECT_EQ(b, -1);
  for (double b : cold_bytes(int64_t{1} << 40)) EXPECT_EQ(b, 0);
  const std::vector<double> tiny = cold_bytes(1);
  EXPECT_GT(*std::max_element(tiny.begin(), tiny.end()), 0);
}

}  // namespace
}  // namespace loom
