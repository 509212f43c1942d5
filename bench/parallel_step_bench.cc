// One training step of gpt-tiny (4 layers) under each schedule, on 4
// in-process ranks (pp=2, mp=2, 4 micro-batches; VPP with 2 chunks), all
// ranks' stream threads sharing this machine's cores. And how steady the
// steps of 2 ranks (mp=2, one core each, as `loom run --preset gpt-tiny
// --layers 4 --mp 2 --micro_batches 4 --schedule 1F1B`) are: the median and
// coefficient of variation of 20 steps after 5, as counters.
#include <benchmark/benchmark.h>

#include <chrono>
#include <vector>

#include "framework/median.h"
#include "runtime/parallel_trainer.h"

namespace loom {
namespace {

void BM_GptTinyParallelStep(benchmark::State& state, const char* schedule, int vpp) {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 4;
  const proto::Strategy s = MakeStrategy(1, 2, 2, 4, schedule, vpp);
  auto trainer = ParallelTrainer::Create(c, {}, s, {});
  CHECK(trainer.ok()) << trainer.status();
  int64_t step = 0;
  for (auto _ : state) {
    auto loss = (*trainer)->Step(step++);
    CHECK(loss.ok()) << loss.status();
  }
}
void BM_GptTinyMpStepSpread(benchmark::State& state) {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 4;
  const proto::Strategy s = MakeStrategy(1, 2, 1, 4, "1F1B");
  ParallelTrainer::Options options;
  options.pin_cores = true;  // as `loom run` does by default
  auto trainer = ParallelTrainer::Create(c, {}, s, options);
  CHECK(trainer.ok()) << trainer.status();
  constexpr int kWarmup = 5;
  constexpr int kSteps = 20;
  std::vector<double> ms;
  for (auto _ : state) {
    ms.clear();
    for (int step = 0; step < kWarmup + kSteps; ++step) {
      const auto start = std::chrono::steady_clock::now();
      auto loss = (*trainer)->Step(step);
      CHECK(loss.ok()) << loss.status();
      const std::chrono::duration<double, std::milli> took =
          std::chrono::steady_clock::now() - start;
      if (step >= kWarmup) ms.push_back(took.count());
    }
  }
  state.counters["median_ms"] = Median(ms);
  state.counters["cv"] = CoefficientOfVariation(ms);
}
BENCHMARK(BM_GptTinyMpStepSpread)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

BENCHMARK_CAPTURE(BM_GptTinyParallelStep, FThenB, "FThenB", 1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GptTinyParallelStep, 1F1B, "1F1B", 1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GptTinyParallelStep, Eager1F1B, "Eager1F1B", 1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GptTinyParallelStep, VPP, "VPP", 2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GptTinyParallelStep, ZBH1, "ZBH1", 1)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace loom

BENCHMARK_MAIN();
