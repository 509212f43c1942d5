// Simulating one step of gpt3-175b on 1024 ranks (dp=8 mp=8 pp=16, 64
// micro-batches of 1F1B) on the h100 cluster: planning (one rank per
// stage), lowering and the event-driven simulation, each phase reported as
// a counter, with the process's peak memory. Single-threaded throughout.
// The cost table is empty, so ops are priced by the roofline: the
// simulator's work does not depend on where the times come from.
#include <sys/resource.h>

#include <benchmark/benchmark.h>

#include "cost_model/cluster.h"
#include "runtime/cost_model_timer.h"
#include "runtime/simulation.h"

namespace loom {
namespace {

void SimulateGpt3(benchmark::State& state, bool fold) {
  const GptConfig config = GptPreset("gpt3-175b").value();
  const proto::Strategy strategy = MakeStrategy(8, 8, 16, 64, "1F1B");
  const CostContext costs(LoadCluster("h100").value(), CostTable());
  TimerFactory timer = CostModelTimers(costs);
  PlanOptions plan_options;
  plan_options.costs = &costs;
  plan_options.cut_by_flops = true;
  SimulationOptions options;
  options.fold_data_parallel = fold;
  GptSimulation last;
  for (auto _ : state) {
    auto sim = SimulateGpt(config, {}, strategy, timer, options, plan_options);
    CHECK(sim.ok()) << sim.status();
    last = std::move(sim).value();
  }
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  state.counters["plan_s"] = last.plan_seconds;
  state.counters["lower_s"] = last.lower_seconds;
  state.counters["simulate_s"] = last.simulate_seconds;
  state.counters["ranks_simulated"] = last.result.ranks_simulated;
  state.counters["instructions"] = static_cast<double>(last.result.instructions);
  state.counters["step_s"] = last.result.step_time_s;
  state.counters["peak_rss_MB"] = usage.ru_maxrss / 1024.0;
}

void BM_SimulateGpt3_175b_1024Ranks(benchmark::State& state) { SimulateGpt3(state, true); }
void BM_SimulateGpt3_175b_1024Ranks_Unfolded(benchmark::State& state) {
  SimulateGpt3(state, false);
}
BENCHMARK(BM_SimulateGpt3_175b_1024Ranks)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK(BM_SimulateGpt3_175b_1024Ranks_Unfolded)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace
}  // namespace loom

BENCHMARK_MAIN();
