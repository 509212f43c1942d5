#include "passes/planner.h"

#include <map>
#include <memory>

#include "passes/amp.h"
#include "scheduler/schedule.h"

namespace loom {

StatusOr<std::string> DefaultPipeline(const proto::Strategy& strategy) {
  LOOM_ASSIGN_OR_RETURN(const ScheduleInfo* schedule,
                        FindSchedule(strategy.pipeline().schedule_mode()));
  std::string p =
      "pipeline-split,tensor-parallel,gradient-accumulation,data-parallel";
  if (strategy.sharding().stage() > 0) p += ",sharding";
  if (strategy.passes().op_split()) {
    p += ",op-split";
    const int parts = strategy.passes().op_split_parts();
    if (parts > 0) p += StrCat("{parts=", parts, "}");
  }
  if (schedule->splits_backward) p += ",split-backward";
  return p + ",job-split,schedule";
}

namespace {

// PlanRank on a program the strategy's mixed precision already rewrote.
StatusOr<RankPlan> PlanRankOfCast(const Program& main, const Program& startup,
                                  const proto::Strategy& strategy, int rank,
                                  const PlanOptions& options) {
  LOOM_RETURN_IF_ERROR(ValidateStrategy(strategy));
  const int world = LayoutOf(strategy).world_size();
  if (rank < 0 || rank >= world) {
    return InvalidArgument("rank ", rank, " is outside the ", world,
                           " ranks of the strategy");
  }
  LOOM_ASSIGN_OR_RETURN(std::string pipeline, DefaultPipeline(strategy));
  PassManager pm(options.pass_manager);
  LOOM_RETURN_IF_ERROR(pm.AddPipeline(pipeline));
  PassContext ctx(strategy, rank, main.Clone(), startup.Clone());
  ctx.set_cost_model(options.cost_model);
  ctx.set_comm_model(options.comm_model);
  Status s = pm.Run(ctx);
  if (!s.ok()) {
    return s.WithContext(StrCat("rank ", rank, " (", CoordsToString(ctx.coords()), ")"));
  }
  if (options.remarks != nullptr) {
    for (const std::string& r : ctx.remarks()) {
      options.remarks->push_back(StrCat("rank ", rank, ": ", r));
    }
  }
  ctx.resolved().set_pipeline(pm.PipelineString());
  return ctx.TakeRankPlan();
}

// The program as the strategy's mixed precision has it (passes/amp.h):
// rewritten once for every rank, before the per-rank pipeline, so that
// each pass sees the casts. Null where the strategy keeps fp32.
StatusOr<std::unique_ptr<Program>> CastProgram(const Program& main,
                                               const proto::Strategy& strategy) {
  LOOM_ASSIGN_OR_RETURN(AmpConfig amp, AmpConfigOf(strategy));
  if (amp.level == 0) return std::unique_ptr<Program>();
  auto cast = std::make_unique<Program>(main.Clone());
  LOOM_RETURN_IF_ERROR(ApplyAmp(*cast, amp).WithContext("mixed precision"));
  return cast;
}

}  // namespace

StatusOr<RankPlan> PlanRank(const Program& main, const Program& startup,
                            const proto::Strategy& strategy, int rank,
                            const PlanOptions& options) {
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<Program> cast, CastProgram(main, strategy));
  return PlanRankOfCast(cast != nullptr ? *cast : main, startup, strategy, rank, options);
}

StatusOr<Plan> PlanRanks(const Program& main, const Program& startup,
                         const proto::Strategy& strategy,
                         const std::vector<int>& ranks,
                         const PlanOptions& options) {
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<Program> cast, CastProgram(main, strategy));
  const Program& program = cast != nullptr ? *cast : main;
  Plan plan;
  plan.layout = LayoutOf(strategy);
  std::vector<int> todo = ranks;
  if (todo.empty()) {
    for (int r = 0; r < plan.layout.world_size(); ++r) todo.push_back(r);
  }
  // Ranks that differ only in their dp coordinate get the same programs and
  // jobs (dp groups are resolved from coordinates when the plan runs), so
  // each (pp, mp) position is planned once and its program set shared.
  std::map<std::pair<int, int>, size_t> planned;  // -> index in plan.ranks
  plan.ranks.reserve(todo.size());
  for (int r : todo) {
    const RankCoords c = plan.layout.Coords(r);
    const int mp = options.share_tensor_parallel_ranks ? 0 : c.mp;
    auto it = planned.find({c.pp, mp});
    if (it == planned.end()) {
      LOOM_ASSIGN_OR_RETURN(RankPlan rp, PlanRankOfCast(program, startup, strategy, r, options));
      if (plan.ranks.empty()) plan.resolved = rp.resolved;
      planned[{c.pp, mp}] = plan.ranks.size();
      plan.ranks.push_back(std::move(rp));
      continue;
    }
    const RankPlan& same = plan.ranks[it->second];
    RankPlan rp;
    rp.rank = r;
    rp.coords = c;
    rp.num_chunks = same.num_chunks;
    rp.jobs = same.jobs;
    rp.program_set = same.program_set;
    rp.resolved = same.resolved;
    plan.ranks.push_back(std::move(rp));
  }
  return plan;
}

}  // namespace loom
