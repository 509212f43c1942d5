// One serial training step of gpt-tiny (forward, backward, AdamW).
#include <benchmark/benchmark.h>

#include "runtime/serial_trainer.h"

namespace loom {
namespace {

void BM_GptTinyTrainStep(benchmark::State& state) {
  auto trainer = SerialTrainer::Create(GptPreset("gpt-tiny").value(), {});
  CHECK(trainer.ok()) << trainer.status();
  int64_t step = 0;
  for (auto _ : state) {
    auto loss = (*trainer)->Step(step++);
    CHECK(loss.ok()) << loss.status();
    benchmark::DoNotOptimize(*loss);
  }
}
BENCHMARK(BM_GptTinyTrainStep)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace loom

BENCHMARK_MAIN();
