// loom tune's whole search (runtime/tuner.h), with the counts that explain
// its time: candidates considered, simulated and pruned. Issue 39's
// targets (gpt3-175b on 1,024 devices in 60 s, a 1T model on 4,096 in 5
// minutes) need the per-stage plan cache still to come; these are the
// sizes the search handles today, to measure that work against.
#include <benchmark/benchmark.h>
#include <glog/logging.h>

#include "cost_model/cluster.h"
#include "cost_model/op_cost_model.h"
#include "runtime/tuner.h"

namespace loom {
namespace {

void TuneOn(benchmark::State& state, const std::string& preset, int64_t batch, int devices,
            const std::string& cluster_name) {
  GptConfig c = GptPreset(preset).value();
  c.batch_size = batch;
  const proto::Cluster cluster = LoadCluster(cluster_name).value();
  const CostContext costs(cluster, CostTable());
  TuneOptions o;
  o.space.devices = devices;
  // bf16 O2, as the GPT-3 recipe trains.
  o.base.mutable_amp()->set_level("O2");
  o.memory_limit_bytes = DeviceMemoryLimit(cluster);
  TuneReport report;
  for (auto _ : state) {
    auto r = Tune(c, OptimizerConfig(), costs, o);
    CHECK(r.ok()) << r.status();
    report = std::move(*r);
  }
  int pruned = 0;
  for (const auto& [rule, n] : report.pruned) pruned += n;
  state.counters["considered"] = report.considered;
  state.counters["simulated"] = static_cast<double>(report.simulated.size());
  state.counters["pruned"] = pruned;
  state.counters["best_ms"] = report.top.empty() ? 0 : 1e3 * report.top.front().step_time_s;
}

void BM_TuneGptSmall_8xA100(benchmark::State& state) {
  TuneOn(state, "gpt-small", 32, 8, "a100");
}
void BM_TuneGpt3_1_3b_8xA100(benchmark::State& state) {
  TuneOn(state, "gpt3-1.3b", 32, 8, "a100");
}
BENCHMARK(BM_TuneGptSmall_8xA100)->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK(BM_TuneGpt3_1_3b_8xA100)->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace
}  // namespace loom

BENCHMARK_MAIN();
