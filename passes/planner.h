// From a training program and a strategy to a Plan: the default pass
// pipeline, run once per rank.
#ifndef LOOM_PASSES_PLANNER_H_
#define LOOM_PASSES_PLANNER_H_

#include <string>
#include <vector>

#include "framework/grad_clip.h"
#include "passes/pass_manager.h"
#include "passes/strategy.h"

namespace loom {

// pipeline-split, tensor-parallel, gradient-accumulation, data-parallel,
// [sharding,] [op-split,] [grad-clip when the program clips,]
// [split-backward when the schedule runs B and W jobs,] job-split,
// schedule, with every value the passes use from the strategy (and the
// program's gradient clipping and loss scaling) written as their options: the pipeline is the
// one channel to the passes. Pipeline-split runs first so that tensor
// parallelism rewrites only the rank's stage, a 1/pp share of the program
// (the ops it inserts take the stage and chunk of the op beside them).
// Grad-clip runs after every pass that moves gradients.
std::string DefaultPipeline(const CheckedStrategy& strategy, const GradScaling& scaling = {});
// Checks the strategy first.
StatusOr<std::string> DefaultPipeline(const proto::Strategy& strategy);

struct PlanOptions {
  PassManagerOptions pass_manager;
  // Receives each rank's pass remarks (--explain), if set.
  std::vector<std::string>* remarks = nullptr;
  // For timing only (the simulator): plan one rank per pipeline stage and
  // let every tensor-parallel rank of the stage share its programs.
  // Megatron's tensor parallelism gives every mp rank the same ops and
  // shapes; only which slice a rank holds differs, which no cost depends
  // on. Such a plan times like the real one but does not train correctly:
  // never run it.
  bool share_tensor_parallel_ranks = false;
  // Op costs of the cluster planned for (PassContext::cost_model); null:
  // FLOP counts. Not owned.
  const OpCostEstimator* cost_model = nullptr;
  // Communication costs there (PassContext::comm_model). Not owned.
  const CommModel* comm_model = nullptr;
};

// Plans one rank of `main` and `startup`. The strategy's mixed precision
// (amp) rewrites a copy of the program first; PlanRanks does so once for
// all the ranks it plans. The passes read `main` in place until one edits
// it (pipeline-split builds the stage's program from it, so the whole is
// never copied): it must not change while a plan is made, and plans made
// from one program in several threads at once need its op numbering
// current first (any Block::OpIndex call).
StatusOr<RankPlan> PlanRank(const Program& main, const Program& startup,
                            const proto::Strategy& strategy, int rank,
                            const PlanOptions& options = {});

// Plans the listed ranks (all, when `ranks` is empty), in rank order. The
// strategy is checked, and its pipeline parsed, once for all of them.
StatusOr<Plan> PlanRanks(const Program& main, const Program& startup,
                         const proto::Strategy& strategy,
                         const std::vector<int>& ranks,
                         const PlanOptions& options = {});

}  // namespace loom

#endif  // LOOM_PASSES_PLANNER_H_
