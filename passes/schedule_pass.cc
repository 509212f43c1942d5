// schedule: the rank's job list, from the strategy's pipeline schedule.
#include "passes/parallel_passes.h"
#include "scheduler/schedule.h"

namespace loom {
namespace {

constexpr const char* kPassName = "schedule";

class SchedulePass : public Pass {
 public:
  SchedulePass(std::string mode, int64_t micro_batches)
      : mode_(std::move(mode)), micro_batches_(micro_batches) {}
  StatusOr<bool> Run(PassContext& ctx) override;

 private:
  std::string mode_;
  int64_t micro_batches_;
};

StatusOr<bool> SchedulePass::Run(PassContext& ctx) {
  if (mode_.empty()) mode_ = ctx.schedule_mode();
  if (micro_batches_ <= 0) micro_batches_ = ctx.micro_batches();
  // Gradient accumulation scaled the loss for its micro-batch count; a
  // schedule over another count would train on a wrongly scaled gradient.
  if (ctx.resolved().has_micro_batches() && ctx.resolved().micro_batches() != micro_batches_) {
    return InvalidArgument("micro-batches=", micro_batches_, " but the batch was split into ",
                           ctx.resolved().micro_batches(), " micro-batches");
  }
  LOOM_ASSIGN_OR_RETURN(const ScheduleInfo* schedule, FindSchedule(mode_));
  ctx.resolved().set_schedule_mode(mode_);
  ctx.resolved().set_micro_batches(static_cast<int32_t>(micro_batches_));
  WorkingPlan& plan = ctx.plan();
  const bool has_split = plan.programs.count({JobType::kBackwardB, 0}) > 0;
  if (schedule->splits_backward && !has_split) {
    return FailedPrecondition("schedule ", mode_,
                              " runs B and W jobs: run split-backward before job-split");
  }
  if (!schedule->splits_backward && has_split) {
    return FailedPrecondition("schedule ", mode_,
                              " runs whole backward jobs, but the backward was split");
  }
  ScheduleParams params{ctx.coords().pp, std::max(1, ctx.pp_degree()),
                        static_cast<int>(micro_batches_), plan.num_chunks};
  LOOM_ASSIGN_OR_RETURN(plan.jobs, schedule->fn(params));
  ctx.Explain(kPassName, StrCat(mode_, " over ", micro_batches_,
                                " micro-batches: ", plan.jobs.size(), " jobs"));
  return true;
}

}  // namespace

PassInfo SchedulePassInfo() {
  PassInfo info;
  info.name = kPassName;
  info.summary = "orders the rank's jobs by the pipeline schedule";
  info.options = {{"mode", "", "FThenB, 1F1B, Eager1F1B, VPP or ZBH1 (default: pipeline.schedule_mode)"},
                  {"micro-batches", "", "default: pipeline.micro_batches"}};
  info.requires_passes = {"job-split"};
  info.create = [](const PassOptions& o) -> StatusOr<std::unique_ptr<Pass>> {
    std::string mode;
    int64_t mb = 0;
    if (o.Has("mode")) {
      LOOM_ASSIGN_OR_RETURN(mode, o.GetString("mode"));
    }
    if (o.Has("micro-batches")) {
      LOOM_ASSIGN_OR_RETURN(mb, o.GetInt("micro-batches"));
    }
    return std::unique_ptr<Pass>(new SchedulePass(mode, mb));
  };
  return info;
}

}  // namespace loom
