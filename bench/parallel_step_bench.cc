// One training step of gpt-tiny (4 layers) under each schedule, on 4
// in-process ranks (pp=2, mp=2, 4 micro-batches; VPP with 2 chunks), all
// ranks' stream threads sharing this machine's cores.
#include <benchmark/benchmark.h>

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
BENCHMARK_CAPTURE(BM_GptTinyParallelStep, FThenB, "FThenB", 1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GptTinyParallelStep, 1F1B, "1F1B", 1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GptTinyParallelStep, Eager1F1B, "Eager1F1B", 1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GptTinyParallelStep, VPP, "VPP", 2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GptTinyParallelStep, ZBH1, "ZBH1", 1)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace loom

BENCHMARK_MAIN();
