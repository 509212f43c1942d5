// The temporaries replayed from a trace (scheduler/temporary_timeline.h):
// over the simulator's own trace they give its peak and what the peak
// holds; over a measured step whose order is fixed (one stream), the
// device allocator's high-water mark; and bad traces are refused by event.
#include "scheduler/temporary_timeline.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cost_model/cluster.h"
#include "cost_model/cost_context.h"
#include "models/gpt.h"
#include "passes/strategy.h"
#include "runtime/gpt_plan.h"
#include "runtime/parallel_trainer.h"
#include "runtime/simulation.h"
#include "unittests/test_plan_options.h"

namespace loom {
namespace {

GptConfig SmallModel() {
  GptConfig c = GptPreset("gpt-small").value();
  c.num_layers = 2;
  c.seq_len = 32;
  c.batch_size = 8;
  c.vocab_size = 512;
  return c;
}

// SmallModel under `s`, simulated on `local` with its trace.
StatusOr<GptSimulation> SimulateTraced(const proto::Strategy& s) {
  static const CostContext costs(LoadCluster("local").value(), CostTable());
  LOOM_ASSIGN_OR_RETURN(Plan plan,
                        PlanGpt(SmallModel(), OptimizerConfig(), s, {}, PlanOptionsAt(costs)));
  SimulationOptions options;
  options.trace = true;
  return SimulatePlan(std::move(plan), CostModelTimers(costs), options);
}

TEST(TemporaryTimeline, ReplayOfASimulatedStepGivesTheSimulatedPeak) {
  struct Case {
    int dp, mp, pp, micro_batches;
    const char* schedule;
    int sharding_stage = 0;
    bool sp = false;
  };
  for (const Case& k : {Case{2, 2, 1, 1, "1F1B", 3}, Case{1, 1, 2, 4, "1F1B"},
                        Case{1, 2, 1, 2, "1F1B", 0, true}, Case{2, 1, 2, 4, "ZBH1", 2}}) {
    SCOPED_TRACE(StrCat("dp", k.dp, " mp", k.mp, " pp", k.pp, " m", k.micro_batches, " ",
                        k.schedule, " zero", k.sharding_stage, k.sp ? " sp" : ""));
    proto::Strategy s = MakeStrategy(k.dp, k.mp, k.pp, k.micro_batches, k.schedule);
    s.mutable_sharding()->set_stage(k.sharding_stage);
    s.mutable_mp()->set_sequence_parallel(k.sp);
    auto sim = SimulateTraced(s);
    ASSERT_TRUE(sim.ok()) << sim.status();
    ASSERT_EQ(sim->graph.ranks.size(), sim->result.ranks.size());
    for (size_t i = 0; i < sim->graph.ranks.size(); ++i) {
      const RankGraph& rank = sim->graph.ranks[i];
      const RankMetrics& m = sim->result.ranks[i];
      auto timeline = ReplayTemporaries(rank, sim->result.trace);
      ASSERT_TRUE(timeline.ok()) << timeline.status();
      EXPECT_GT(timeline->peak_bytes, 0) << "rank " << rank.rank;
      EXPECT_EQ(timeline->peak_bytes, m.peak_temporary_bytes) << "rank " << rank.rank;
      // What the peak holds, by kind, is the simulator's breakdown.
      std::array<int64_t, kNumMemoryKinds> by_kind{};
      int64_t sum = 0;
      for (int t : timeline->live_at_peak) {
        const Temporary& temp = rank.body->temporaries[t];
        by_kind[static_cast<int>(temp.kind)] += temp.bytes;
        sum += temp.bytes;
      }
      EXPECT_EQ(sum, timeline->peak_bytes) << "rank " << rank.rank;
      EXPECT_EQ(by_kind, m.peak_temporaries_by_kind) << "rank " << rank.rank;
      // The line names the op the peak is reached at and its largest holding.
      const std::string line = DescribePeak(rank, *timeline, 1);
      const Instruction& at = rank.instructions()[timeline->peak_instruction];
      EXPECT_EQ(line.rfind(StrCat(std::round(m.peak_temporary_bytes / 1e4) / 100, " MB at ",
                                  at.op_type, " (job "),
                           0),
                0u)
          << line;
      int largest = timeline->live_at_peak.front();
      for (int t : timeline->live_at_peak) {
        if (rank.body->temporaries[t].bytes > rank.body->temporaries[largest].bytes) largest = t;
      }
      EXPECT_NE(line.find(StrCat(": ", rank.body->var_names[rank.body->temporaries[largest].var])),
                std::string::npos)
          << line;
      // The track ends where the step frees everything it made.
      ASSERT_FALSE(timeline->points.empty());
      int64_t most = 0;
      for (const auto& p : timeline->points) most = std::max(most, p.bytes);
      EXPECT_EQ(most, timeline->peak_bytes);
    }
  }
}

// On one stream the executor's order is the issue order, so the replay of
// its trace must give what its allocator counted, to the byte.
TEST(TemporaryTimeline, ReplayOfAMeasuredOneStreamStepGivesTheAllocatorsPeak) {
  const GptConfig c = SmallModel();
  ParallelTrainer::Options options;
  options.comm.timeout = std::chrono::seconds(30);
  options.trace = true;
  auto t = ParallelTrainer::Create(c, OptimizerConfig(), MakeStrategy(1, 1, 1, 2, "1F1B"), options);
  ASSERT_TRUE(t.ok()) << t.status();
  const RankGraph& rank = (*t)->graph().ranks.at(0);
  ASSERT_EQ(rank.streams().size(), 1u) << "the test wants a plan of one stream";
  ASSERT_TRUE((*t)->Step(0).ok());
  (*t)->TakeTrace();
  (*t)->rank_device(0).ResetPeakBytes();
  ASSERT_TRUE((*t)->Step(1).ok());
  const int64_t measured = (*t)->rank_device(0).Memory().peak_bytes;
  auto timeline = ReplayTemporaries(rank, (*t)->TakeTrace(), ParallelTrainer::KeptVars());
  ASSERT_TRUE(timeline.ok()) << timeline.status();
  EXPECT_GT(measured, 0);
  EXPECT_EQ(timeline->peak_bytes, measured);
}

TEST(TemporaryTimeline, RefusesATraceThatIsNotOneStepOfTheRank) {
  auto sim = SimulateTraced(MakeStrategy(1, 1, 1, 1, "1F1B"));
  ASSERT_TRUE(sim.ok()) << sim.status();
  const RankGraph& rank = sim->graph.ranks.at(0);

  std::vector<TraceEvent> twice = sim->result.trace;
  twice.push_back(twice.front());
  auto replay = ReplayTemporaries(rank, twice);
  ASSERT_FALSE(replay.ok());
  EXPECT_NE(replay.status().message().find("runs twice"), std::string::npos) << replay.status();

  std::vector<TraceEvent> unknown = sim->result.trace;
  unknown.back().instruction = static_cast<int>(rank.instructions().size());
  replay = ReplayTemporaries(rank, unknown);
  ASSERT_FALSE(replay.ok());
  EXPECT_NE(replay.status().message().find("is not one of the rank's"), std::string::npos)
      << replay.status();
}

TEST(TemporaryTimeline, TheTraceFileCarriesTheTrackAndReadsBack) {
  auto sim = SimulateTraced(MakeStrategy(1, 1, 2, 2, "1F1B"));
  ASSERT_TRUE(sim.ok()) << sim.status();
  auto timelines = ReplayTracedRanks(sim->graph, sim->result.trace);
  ASSERT_TRUE(timelines.ok()) << timelines.status();
  const std::vector<TraceCounter> counters = TemporaryCounters(*timelines);
  ASSERT_EQ(counters.size(), 2u);  // one track a rank
  const std::string text = ChromeTraceJson(sim->result.trace, counters);
  const nlohmann::json doc = nlohmann::json::parse(text);
  double most_mb[2] = {0, 0};
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "C") continue;
    EXPECT_EQ(e["name"], "temporaries (MB)");
    const int pid = e["pid"].get<int>();
    ASSERT_TRUE(pid == 0 || pid == 1) << pid;
    most_mb[pid] = std::max(most_mb[pid], e["args"]["value"].get<double>());
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_NEAR(most_mb[r], sim->result.ranks[r].peak_temporary_bytes / 1e6, 1e-9) << "rank " << r;
  }
  // The counters do not disturb reading the instructions back, and the
  // file keeps when a waiting call arrived: its replay gives the peaks.
  auto events = ParseChromeTrace(text);
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_EQ(events->size(), sim->result.trace.size());
  int waited = 0;
  for (const TraceEvent& e : *events) waited += e.arrived_ns >= 0 && e.arrived_ns < e.start_ns;
  EXPECT_GT(waited, 0) << "a pipeline's recvs wait for their sends";
  for (int r = 0; r < 2; ++r) {
    auto replayed = ReplayTemporaries(sim->graph.ranks[r], *events);
    ASSERT_TRUE(replayed.ok()) << replayed.status();
    EXPECT_EQ(replayed->peak_bytes, sim->result.ranks[r].peak_temporary_bytes) << "rank " << r;
  }
}

}  // namespace
}  // namespace loom
