// Times a plan's ops where they run: inside training steps of each rank,
// with communication reduced to its local part
// (ParallelTrainer::Options::local_communication). An op timed alone in a
// loop finds its inputs in cache and its allocations recycled; inside a
// step it follows other ops, as it will when the plan runs, and small ops
// take up to twice as long there (gpt-tiny's micro-batch slices on this
// host). Where the plan puts ranks on the host's other cores, copies of the
// timed rank run there at the same time, pinned a core each: beside a
// neighbour, memory-bound ops ran 15-40% slower than alone (gpt-tiny dp=2,
// batch 64). `loom profile` fills the cost table from it.
#ifndef LOOM_RUNTIME_STEP_PROFILER_H_
#define LOOM_RUNTIME_STEP_PROFILER_H_

#include <functional>
#include <string>
#include <vector>

#include "executor/op_profiler.h"
#include "models/gpt.h"
#include "scheduler/plan.h"

namespace loom {

struct StepProfileOptions {
  int warmup_steps = 2;  // untimed: allocations, caches, OpenBLAS buffers
  int steps = 7;         // timed; one sample per step
  // Copies of each timed rank run at once, one per core (at most the
  // process's cores); 0: as many as the plan has ranks.
  int side_by_side = 0;
};

// Called before each step (all timed ranks take it in turns): the step,
// from 0, and how many there are, warm-up included.
using StepProgressFn = std::function<void(int step, int total_steps)>;

// The ranks ProfileInStep times: one per program set (the others run the
// same ops), in rank order.
std::vector<int> InStepTimedRanks(const Plan& plan);

// Every signature that computes in the steps of `plan` (a plan of every
// rank of `config`'s model): per timed step, the mean over the op's runs in
// that step, and the median over the steps (OpTiming::samples steps of
// runs_per_sample runs, the runs of one step). Ranks that share a program
// set are timed once; the timed ranks take their steps in turns, all alive
// at once. Pure communication is not timed (it has no compute); the
// vocabulary-parallel cross entropy is, without its reductions.
StatusOr<std::vector<OpTiming>> ProfileInStep(const GptConfig& config, const Plan& plan,
                                              const StepProfileOptions& options,
                                              const StepProgressFn& progress = nullptr);

}  // namespace loom

#endif  // LOOM_RUNTIME_STEP_PROFILER_H_
