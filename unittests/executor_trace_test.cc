// The executor's measured trace (`loom run --trace`, the in-step profiler,
// `loom simulate --compare`): one event per instruction, on the times the
// instruction's work took.
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "models/gpt.h"
#include "passes/strategy.h"
#include "runtime/parallel_trainer.h"

namespace loom {
namespace {

// gpt-tiny over two pipeline stages, FThenB, traced: stage 0 receives each
// micro-batch's gradient while it waits with nothing to compute, so its
// receiving thread wakes the calc thread, which takes the core at once.
// Without stream priorities, so that calc and the receiving thread run at
// one nice level, as where the misplaced stamps were found.
std::vector<TraceEvent> TracedPipelineStep(std::unique_ptr<ParallelTrainer>* trainer) {
  GptConfig c = GptPreset("gpt-tiny").value();
  ParallelTrainer::Options options;
  options.trace = true;
  options.pin_cores = true;
  options.stream_priorities = false;
  auto made = ParallelTrainer::Create(c, {}, MakeStrategy(1, 1, 2, 4, "FThenB"), options);
  EXPECT_TRUE(made.ok()) << made.status();
  if (!made.ok()) return {};
  *trainer = std::move(made).value();
  std::vector<TraceEvent> last;
  for (int step = 0; step < 4; ++step) {
    EXPECT_TRUE((*trainer)->Step(step).ok());
    last = (*trainer)->TakeTrace();
  }
  return last;
}

// An instruction's event ends before any instruction that waits on it
// starts. Stamped after the event was recorded, a recv's end came up to a
// scheduler tick after the compute it released had started, and traces
// then blamed the transfer.
TEST(ExecutorTrace, AnInstructionEndsBeforeWhatWaitsOnItStarts) {
  std::unique_ptr<ParallelTrainer> trainer;
  const std::vector<TraceEvent> trace = TracedPipelineStep(&trainer);
  ASSERT_NE(trainer, nullptr);
  const ExecutionGraph& graph = trainer->graph();
  // (rank, instruction) -> its event.
  std::map<std::pair<int, int>, const TraceEvent*> event_of;
  for (const TraceEvent& e : trace) event_of[{e.rank, e.instruction}] = &e;
  int checked = 0;
  for (const RankGraph& rank : graph.ranks) {
    ASSERT_EQ(
        static_cast<int>(rank.instructions().size()),
        static_cast<int>(std::count_if(trace.begin(), trace.end(),
                                       [&](const TraceEvent& e) { return e.rank == rank.rank; })))
        << "rank " << rank.rank << ": one event per instruction";
    for (const Instruction& ins : rank.instructions()) {
      const TraceEvent* e = event_of.at({rank.rank, ins.id});
      EXPECT_LE(e->start_ns, e->end_ns);
      for (int dep : ins.deps) {
        const TraceEvent* d = event_of.at({rank.rank, dep});
        EXPECT_LE(d->end_ns, e->start_ns)
            << "rank " << rank.rank << ": " << d->op << " (" << d->stream << ", instruction " << dep
            << ") ends " << (d->end_ns - e->start_ns) * 1e-6 << " ms after " << e->op << " ("
            << e->stream << ", instruction " << ins.id << "), which waits on it, starts";
        ++checked;
      }
    }
  }
  // The gradients' recvs and the sends of activations, at least.
  EXPECT_GE(checked, 8);
}

}  // namespace
}  // namespace loom
