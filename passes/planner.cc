#include "passes/planner.h"

#include <map>
#include <memory>

#include "framework/grad_clip.h"
#include "passes/amp.h"

namespace loom {
namespace {

const char* BoolText(bool b) { return b ? "true" : "false"; }

// One rank of a checked strategy, by its parsed pipeline, from prepared
// programs: what PlanRank and PlanPrepared share, so that PlanPrepared
// checks and parses once.
StatusOr<RankPlan> PlanCheckedRank(const Program& main, const Program& startup,
                                   const CheckedStrategy& strategy,
                                   const PassPipeline& pipeline, int rank,
                                   const PlanOptions& options,
                                   SharedAnalyses* shared = nullptr) {
  const int world = strategy.layout.world_size();
  if (rank < 0 || rank >= world) {
    return InvalidArgument("rank ", rank, " is outside the ", world,
                           " ranks of the strategy");
  }
  PassManager pm(options.pass_manager);
  LOOM_RETURN_IF_ERROR(pm.AddPipeline(pipeline));
  // The programs come numbered (PreparedPrograms::Prepare).
  PassContext ctx(strategy.layout, rank, &main, &startup);
  ctx.set_costs(options.costs);
  ctx.set_cut_by_flops(options.cut_by_flops);
  ctx.set_shared_analyses(shared);
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

// The pipeline every rank of one plan runs: the checked strategy's, for
// programs prepared for its mixed precision.
StatusOr<PassPipeline> PipelineFor(const PreparedPrograms& programs,
                                   const CheckedStrategy& checked) {
  if (!programs.IsFor(checked.amp)) {
    return InvalidArgument("the strategy's amp section {",
                           checked.strategy.amp().ShortDebugString(),
                           "} is not the mixed precision its programs were prepared for");
  }
  return PassPipeline::Parse(DefaultPipeline(checked, programs.scaling()));
}

}  // namespace

std::string DefaultPipeline(const CheckedStrategy& checked, const GradScaling& scaling) {
  const proto::Strategy& s = checked.strategy;
  const proto::PipelineStrategy& pp = s.pipeline();
  const proto::ShardingStrategy& sharding = s.sharding();
  const proto::PassSwitches& switches = s.passes();
  const char* schedule = checked.schedule->name;
  std::string p = StrCat(
      "pipeline-split{stages=", pp.degree(), ",chunks=", pp.vpp_degree(),
      checked.schedule->v_shape ? ",v-shape=true" : "", "}",
      ",tensor-parallel{degree=", s.mp().degree(),
      ",async-allreduce=", BoolText(switches.mp_async_allreduce_in_backward()), "}",
      s.mp().sequence_parallel() ? ",sequence-parallel" : "",
      ",gradient-accumulation{steps=", pp.micro_batches(), "}");
  if (s.recompute().granularity() != "none") {
    p += StrCat(",recompute{granularity=", s.recompute().granularity(),
                ",layers=", s.recompute().num_layers(), "}");
  }
  p += StrCat(
      // Bucketing off is one all-reduce per gradient: buckets of a byte.
      ",data-parallel{degree=", s.dp().degree(),
      ",bucket-bytes=", switches.dp_bucketing() ? s.dp().bucket_size_bytes() : 1,
      ",for-sharding=", BoolText(sharding.stage() > 0),
      ",reduce-dtype=", s.amp().grad_reduce_dtype(), "}");
  if (sharding.stage() > 0) {
    p += StrCat(",sharding{stage=", sharding.stage(), ",degree=", sharding.degree(),
                ",fetch-mode=", sharding.fetch_mode(),
                ",prefetch-depth=", sharding.prefetch_depth(),
                ",keep-gathered-bytes=", sharding.keep_gathered_bytes(), "}");
  }
  // The casts AMP put at each use of a parameter, once a step instead.
  if (s.amp().level() != "O0" && switches.low_precision_weights()) {
    p += ",low-precision-weights";
  }
  if (switches.op_split()) {
    p += StrCat(",op-split{parts=", switches.op_split_parts(), ",schedule=", schedule,
                ",max-in-flight=", pp.max_in_flight(), "}");
  }
  if (scaling.any()) {
    p += StrCat(",grad-clip{max-norm=", pass_options_internal::PrintFloat(scaling.max_norm),
                ",loss-scaling=", BoolText(scaling.loss_scaling),
                ",growth-interval=", scaling.growth_interval,
                ",init-loss-scale=", pass_options_internal::PrintFloat(scaling.init_loss_scale),
                "}");
  }
  if (checked.schedule->splits_backward) p += ",split-backward";
  return p + StrCat(",job-split,schedule{mode=", schedule, ",micro-batches=",
                    pp.micro_batches(), ",max-in-flight=", pp.max_in_flight(), "}");
}

StatusOr<std::string> DefaultPipeline(const proto::Strategy& strategy) {
  LOOM_ASSIGN_OR_RETURN(const CheckedStrategy checked, CheckStrategy(strategy));
  return DefaultPipeline(checked);
}

StatusOr<PreparedPrograms> PreparedPrograms::Prepare(const Program& main,
                                                     const Program& startup,
                                                     const AmpConfig& amp) {
  PreparedPrograms out;
  out.amp_ = amp;
  out.main_ = &main;
  out.startup_ = &startup;
  auto own = [&out] {
    if (out.owned_main_) return;
    out.owned_main_ = std::make_unique<Program>(out.main_->Clone());
    out.owned_startup_ = std::make_unique<Program>(out.startup_->Clone());
    out.main_ = out.owned_main_.get();
    out.startup_ = out.owned_startup_.get();
  };
  if (amp.level > 0) {
    own();
    LOOM_RETURN_IF_ERROR(
        ApplyAmp(*out.owned_main_, amp, out.owned_startup_.get()).WithContext("mixed precision"));
  }
  if (HasGradClip(*out.main_)) {
    own();
    LOOM_ASSIGN_OR_RETURN(out.scaling_, TakeGradClip(*out.owned_main_));
    if (std::optional<float> init = InitialLossScale(*out.startup_)) {
      out.scaling_.init_loss_scale = *init;
    }
  }
  // Numbered now, so that passes reading them in place, in several
  // threads at once, find the numbering current and leave it as it is.
  for (const Program* p : {out.main_, out.startup_}) {
    for (int b = 0; b < p->num_blocks(); ++b) {
      const Block& block = p->block(b);
      if (!block.empty()) (void)block.OpIndex(block.front());
    }
  }
  return out;
}

bool PreparedPrograms::IsFor(const AmpConfig& amp) const {
  return amp.level == amp_.level &&
         (amp.level == 0 ||
          (amp.dtype == amp_.dtype && amp.init_loss_scale == amp_.init_loss_scale &&
           amp.growth_interval == amp_.growth_interval));
}

StatusOr<RankPlan> PlanRank(const Program& main, const Program& startup,
                            const proto::Strategy& strategy, int rank,
                            const PlanOptions& options) {
  LOOM_ASSIGN_OR_RETURN(const CheckedStrategy checked, CheckStrategy(strategy));
  LOOM_ASSIGN_OR_RETURN(const PreparedPrograms programs,
                        PreparedPrograms::Prepare(main, startup, checked.amp));
  LOOM_ASSIGN_OR_RETURN(const PassPipeline pipeline, PipelineFor(programs, checked));
  return PlanCheckedRank(programs.main(), programs.startup(), checked, pipeline, rank, options);
}

StatusOr<Plan> PlanRanks(const Program& main, const Program& startup,
                         const proto::Strategy& strategy,
                         const std::vector<int>& ranks,
                         const PlanOptions& options) {
  LOOM_ASSIGN_OR_RETURN(const CheckedStrategy checked, CheckStrategy(strategy));
  LOOM_ASSIGN_OR_RETURN(const PreparedPrograms programs,
                        PreparedPrograms::Prepare(main, startup, checked.amp));
  return PlanPrepared(programs, checked, ranks, options);
}

StatusOr<Plan> PlanPrepared(const PreparedPrograms& programs, const CheckedStrategy& checked,
                            const std::vector<int>& ranks, const PlanOptions& options) {
  LOOM_ASSIGN_OR_RETURN(const PassPipeline pipeline, PipelineFor(programs, checked));
  const Program& program = programs.main();
  const Program& start = programs.startup();
  Plan plan;
  plan.layout = checked.layout;
  std::vector<int> todo = ranks;
  if (todo.empty()) {
    for (int r = 0; r < plan.layout.world_size(); ++r) todo.push_back(r);
  }
  // Ranks that differ only in their dp coordinate get the same programs and
  // jobs (dp groups are resolved from coordinates when the plan runs), so
  // each (pp, mp) position is planned once and its program set shared.
  std::map<std::pair<int, int>, size_t> planned;  // -> index in plan.ranks
  SharedAnalyses shared;  // what one rank's passes learn for the others
  plan.ranks.reserve(todo.size());
  for (int r : todo) {
    const RankCoords c = plan.layout.Coords(r);
    const int mp = options.share_tensor_parallel_ranks ? 0 : c.mp;
    auto it = planned.find({c.pp, mp});
    if (it == planned.end()) {
      LOOM_ASSIGN_OR_RETURN(RankPlan rp, PlanCheckedRank(program, start, checked,
                                                         pipeline, r, options, &shared));
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
