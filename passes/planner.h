// From a training program and a strategy to a Plan: the default pass
// pipeline, run once per rank.
#ifndef LOOM_PASSES_PLANNER_H_
#define LOOM_PASSES_PLANNER_H_

#include <memory>
#include <string>
#include <vector>

#include "framework/grad_clip.h"
#include "passes/amp.h"
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

// The serial programs as every strategy of one mixed precision plans them:
// rewritten for it (passes/amp.h), so that each pass sees the casts, with
// the program's gradient clipping taken off (framework/grad_clip.h) for the
// grad-clip pass, and their ops numbered. A search over strategies
// prepares them once for all of its plans.
class PreparedPrograms {
 public:
  // Where neither AMP nor clipping rewrites them, reads `main` and
  // `startup` in place: they must then outlive this.
  static StatusOr<PreparedPrograms> Prepare(const Program& main, const Program& startup,
                                            const AmpConfig& amp);

  const Program& main() const { return *main_; }
  const Program& startup() const { return *startup_; }
  // The program's clipping and loss scaling, for the grad-clip pass.
  const GradScaling& scaling() const { return scaling_; }
  // Whether a strategy of mixed precision `amp` plans from these.
  bool IsFor(const AmpConfig& amp) const;

 private:
  PreparedPrograms() = default;

  AmpConfig amp_;
  GradScaling scaling_;
  std::unique_ptr<Program> owned_main_, owned_startup_;  // null: the caller's
  const Program* main_ = nullptr;
  const Program* startup_ = nullptr;
};

// Plans one rank of `main` and `startup`, prepared for the strategy's mixed
// precision first (PlanRanks prepares once for all the ranks it plans). The
// passes read the programs in place until one edits them (pipeline-split
// builds the stage's program, so the whole is never copied): they must not
// change while a plan is made.
StatusOr<RankPlan> PlanRank(const Program& main, const Program& startup,
                            const proto::Strategy& strategy, int rank,
                            const PlanOptions& options = {});

// Plans the listed ranks (all, when `ranks` is empty), in rank order. The
// strategy is checked, and its pipeline parsed, once for all of them.
StatusOr<Plan> PlanRanks(const Program& main, const Program& startup,
                         const proto::Strategy& strategy,
                         const std::vector<int>& ranks,
                         const PlanOptions& options = {});

// PlanRanks of a checked strategy, from programs prepared for its mixed
// precision (an error otherwise). Plans from the same programs may be made
// in several threads at once.
StatusOr<Plan> PlanPrepared(const PreparedPrograms& programs, const CheckedStrategy& checked,
                            const std::vector<int>& ranks, const PlanOptions& options = {});

}  // namespace loom

#endif  // LOOM_PASSES_PLANNER_H_
