// Building and verifying the largest preset's training program.
#include <benchmark/benchmark.h>

#include "framework/verifier.h"
#include "models/gpt.h"

namespace loom {
namespace {

void BM_BuildGpt3_175b(benchmark::State& state) {
  GptConfig config = GptPreset("gpt3-175b").value();
  int64_t ops = 0;
  for (auto _ : state) {
    auto tp = BuildGptTrainingProgram(config);
    CHECK(tp.ok()) << tp.status();
    ops = tp->main.global_block().num_ops();
  }
  state.counters["ops"] = static_cast<double>(ops);
}
BENCHMARK(BM_BuildGpt3_175b)->Unit(benchmark::kMillisecond);

void BM_VerifyGpt3_175b(benchmark::State& state) {
  GptConfig config = GptPreset("gpt3-175b").value();
  auto tp = BuildGptTrainingProgram(config);
  CHECK(tp.ok()) << tp.status();
  for (auto _ : state) {
    Status s = VerifyProgram(tp->main);
    CHECK(s.ok()) << s;
  }
  state.counters["ops"] = static_cast<double>(tp->main.global_block().num_ops());
}
BENCHMARK(BM_VerifyGpt3_175b)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace loom

BENCHMARK_MAIN();
