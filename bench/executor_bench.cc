// The serial executor's per-op overhead: a chain of trivial ops on a
// one-element tensor, so that kernel time is negligible beside dispatch,
// output allocation and freeing.
#include <benchmark/benchmark.h>

#include "executor/serial_executor.h"
#include "framework/op_builder.h"
#include "framework/shape_inference.h"

namespace loom {
namespace {

Program ScaleChain(int64_t n) {
  RegisterAllOps();
  Program p;
  Block& b = p.global_block();
  proto::VarDesc* x = b.AddVar("v0");
  x->add_shape(1);
  x->set_is_data(true);
  for (int64_t i = 0; i < n; ++i) {
    CHECK(AppendOpInferShapes(b, OpDescBuilder("scale")
                                     .Input("X", StrCat("v", i))
                                     .Output("Out", StrCat("v", i + 1))
                                     .Attr("scale", 1.0f))
              .ok());
  }
  return p;
}

void BM_SerialExecutorPerOp(benchmark::State& state) {
  const int64_t n = state.range(0);
  Program p = ScaleChain(n);
  Scope scope;
  scope.Var("v0")->CopyFrom(MakeTensor({1}, std::vector<float>{1.0f}));
  auto exec = SerialExecutor::Create(p, &scope);
  CHECK(exec.ok()) << exec.status();
  for (auto _ : state) {
    Status s = (*exec)->Run();
    CHECK(s.ok()) << s;
  }
  // Reported as time per op: the figure docs/performance.md quotes.
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["ns_per_op"] = benchmark::Counter(
      static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate |
                                  benchmark::Counter::kInvert);
}
BENCHMARK(BM_SerialExecutorPerOp)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace loom

BENCHMARK_MAIN();
