// The whole pass pipeline for one rank of gpt3-175b at dp=8 mp=8 pp=16
// (1024 ranks), 16 micro-batches of 1F1B (and ZBH1, VPP, with full and
// selective recomputation, with sequence parallelism); the training program is built once, outside
// the timed loop. Target: under 150 ms a rank.
#include <benchmark/benchmark.h>

#include "cost_model/cost_context.h"
#include "models/gpt.h"
#include "passes/planner.h"

namespace loom {
namespace {

proto::Strategy Gpt3Strategy(const std::string& schedule, int vpp,
                             const std::string& recompute, bool sequence_parallel) {
  proto::Strategy s = MakeStrategy(8, 8, 16, 16, schedule, vpp);
  s.mutable_recompute()->set_granularity(recompute);
  s.mutable_mp()->set_sequence_parallel(sequence_parallel);
  return s;
}

void PlanOneRank(benchmark::State& state, const std::string& schedule, int vpp,
                 const std::string& recompute = "none", bool sequence_parallel = false) {
  static const TrainingProgram* const tp = new TrainingProgram(
      BuildGptTrainingProgram(GptPreset("gpt3-175b").value()).value());
  const proto::Strategy s = Gpt3Strategy(schedule, vpp, recompute, sequence_parallel);
  const int rank = static_cast<int>(state.range(0));
  int64_t ops = 0;
  // As `loom run` plans: the local preset's costs, the cut by FLOPs.
  PlanOptions options;
  options.costs = LocalPresetCosts().value();
  options.cut_by_flops = true;
  for (auto _ : state) {
    auto plan = PlanRank(tp->main, tp->startup, s, rank, options);
    CHECK(plan.ok()) << plan.status();
    ops = 0;
    for (const auto& [key, p] : plan->programs()) ops += p.global_block().num_ops();
  }
  state.counters["rank_ops"] = static_cast<double>(ops);
}

void BM_PlanRankGpt3_175b_1F1B(benchmark::State& state) { PlanOneRank(state, "1F1B", 1); }
void BM_PlanRankGpt3_175b_ZBH1(benchmark::State& state) { PlanOneRank(state, "ZBH1", 1); }
void BM_PlanRankGpt3_175b_VPP2(benchmark::State& state) { PlanOneRank(state, "VPP", 2); }
void BM_PlanRankGpt3_175b_1F1B_FullRecompute(benchmark::State& state) {
  PlanOneRank(state, "1F1B", 1, "full");
}
void BM_PlanRankGpt3_175b_ZBH1_SelectiveRecompute(benchmark::State& state) {
  PlanOneRank(state, "ZBH1", 1, "selective");
}
void BM_PlanRankGpt3_175b_1F1B_SequenceParallelSelective(benchmark::State& state) {
  PlanOneRank(state, "1F1B", 1, "selective", true);
}
// Rank 0 holds the first stage; rank 1023 the last (the LM head).
BENCHMARK(BM_PlanRankGpt3_175b_1F1B)->Arg(0)->Arg(1023)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlanRankGpt3_175b_1F1B_FullRecompute)->Arg(0)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlanRankGpt3_175b_ZBH1_SelectiveRecompute)->Arg(0)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlanRankGpt3_175b_1F1B_SequenceParallelSelective)
    ->Arg(0)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlanRankGpt3_175b_ZBH1)->Arg(0)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlanRankGpt3_175b_VPP2)->Arg(0)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace loom

BENCHMARK_MAIN();
