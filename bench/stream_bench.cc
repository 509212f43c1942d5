// The rank executor's cost per instruction on CPU streams: a chain of
// trivial ops on a one-element tensor, either all on one stream or
// alternating between two streams so that every instruction waits for an
// event recorded on the other (enqueue, run an empty-cost kernel, record,
// wait). BM_OneStreamTimingKernels is the first with each kernel timed
// (RankExecutorOptions::time_kernels, which loom run's straggler watch
// turns on).
#include <benchmark/benchmark.h>

#include "executor/rank_executor.h"
#include "framework/op_builder.h"
#include "framework/shape_inference.h"

namespace loom {
namespace {

RankPlan ChainPlan(int64_t n, bool alternate) {
  RegisterAllOps();
  RankPlan plan;
  Program& p = MutableProgramSet(plan).programs[{JobType::kForward, 0}];
  Block& b = p.global_block();
  proto::VarDesc* x = b.AddVar("v0");
  x->add_shape(1);
  x->set_is_data(true);
  for (int64_t i = 0; i < n; ++i) {
    proto::OpDesc d = OpDescBuilder("scale")
                          .Input("X", StrCat("v", i))
                          .Output("Out", StrCat("v", i + 1))
                          .Attr("scale", 1.0f);
    if (alternate && i % 2 == 1) d.set_stream(stream::kMp);
    CHECK(AppendOpInferShapes(b, d).ok());
  }
  plan.jobs = {Job{JobType::kForward, 0, 0}};
  return plan;
}

void RunChain(benchmark::State& state, bool alternate, bool time_kernels = false) {
  const int64_t n = state.range(0);
  RankPlan plan = ChainPlan(n, alternate);
  RankGraph graph = LowerRank(plan, ParallelLayout{}).value();
  Scope scope;
  RankExecutorOptions options;
  options.keep = {StrCat("v", n)};
  options.time_kernels = time_kernels;
  auto exec = RankExecutor::Create(graph, plan, &scope, options).value();
  for (auto _ : state) {
    exec->micro_batch_scope(0)->Var("v0")->CopyFrom(
        MakeTensor({1}, std::vector<float>{1.0f}));
    Status s = exec->RunStep();
    CHECK(s.ok()) << s;
  }
  state.counters["ns_per_instruction"] = benchmark::Counter(
      static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate |
                                  benchmark::Counter::kInvert);
}

void BM_OneStream(benchmark::State& state) { RunChain(state, false); }
void BM_TwoStreamsEveryOpWaits(benchmark::State& state) { RunChain(state, true); }
void BM_OneStreamTimingKernels(benchmark::State& state) { RunChain(state, false, true); }
BENCHMARK(BM_OneStream)->Arg(10000)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TwoStreamsEveryOpWaits)->Arg(10000)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_OneStreamTimingKernels)->Arg(10000)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace loom

BENCHMARK_MAIN();
