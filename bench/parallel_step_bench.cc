// One training step of gpt-tiny (4 layers) under each schedule, on 4
// in-process ranks (pp=2, mp=2, 4 micro-batches; VPP with 2 chunks), all
// ranks' stream threads sharing this machine's cores. And how steady the
// steps of 2 ranks (mp=2, one core each, as `loom run --preset gpt-tiny
// --layers 4 --mp 2 --micro_batches 4 --schedule 1F1B`) are: the median and
// coefficient of variation of 20 steps after 5, as counters. And 2 pinned
// ranks of pp=2 on micro-batches of 16 sequences of 64 (`loom run --preset
// gpt-tiny --layers 4 --batch_size 64 --seq_len 64 --pp 2 --micro_batches
// 4`), whose activations are blocks the host memory cache keeps: the step
// a rank's blocks staying on its core makes faster.
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

void BM_GptTinyPp2Batch64Step(benchmark::State& state) {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 4;
  c.batch_size = 64;
  c.seq_len = 64;
  const proto::Strategy s = MakeStrategy(1, 1, 2, 4, "1F1B");
  ParallelTrainer::Options options;
  options.pin_cores = true;
  auto trainer = ParallelTrainer::Create(c, {}, s, options);
  CHECK(trainer.ok()) << trainer.status();
  int64_t step = 0;
  for (; step < 2; ++step) CHECK((*trainer)->Step(step).ok());  // the cache fills
  for (auto _ : state) {
    auto loss = (*trainer)->Step(step++);
    CHECK(loss.ok()) << loss.status();
  }
}
BENCHMARK(BM_GptTinyPp2Batch64Step)->UseRealTime()->Unit(benchmark::kMillisecond);

BENCHMARK_CAPTURE(BM_GptTinyParallelStep, FThenB, "FThenB", 1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GptTinyParallelStep, 1F1B, "1F1B", 1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GptTinyParallelStep, Eager1F1B, "Eager1F1B", 1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GptTinyParallelStep, VPP, "VPP", 2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GptTinyParallelStep, ZBH1, "ZBH1", 1)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace loom

BENCHMARK_MAIN();
