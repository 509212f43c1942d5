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
  // What work costs on the cluster planned for (cost_model/cost_context.h):
  // pipeline-split balances its cut by its op prices, data-parallel sizes
  // its default bucket, sharding picks its automatic fetch mode and op-split
  // its parts by them. Not owned. Null: no cluster named; pipeline-split
  // counts FLOPs, and a pass that needs a price fails saying so.
  const CostContext* costs = nullptr;
  // Pipeline-split weighs layers by FLOP counts even with `costs`: what
  // `loom run` does, so that a run's plan does not depend on the cost table
  // in the user's cache (and `loom simulate` without --cluster, to plan as
  // the run does).
  bool cut_by_flops = false;
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
