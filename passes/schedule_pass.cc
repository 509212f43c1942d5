// schedule: the rank's job list, by a pipeline schedule.
#include "framework/op_registry.h"
#include "passes/parallel_passes.h"
#include "scheduler/layout.h"
#include "scheduler/schedule.h"

namespace loom {
namespace {

constexpr const char* kPassName = "schedule";

// Where an overlap schedule cuts `program` into parts: after each
// tensor-parallel collective off the calc stream, so that the part after
// it starts with what waits for it (for a split op, after its last part's).
std::vector<int> CutsAfterMpCollectives(const Program& program) {
  std::vector<int> cuts;
  const std::vector<Op*> ops = program.global_block().OpVector();
  for (int k = 0; k + 1 < static_cast<int>(ops.size()); ++k) {
    const Op& op = *ops[k];
    if (CommKindOf(op.type()) != CommKind::kCollective) continue;
    if (stream::IsCalc(op.desc().stream())) continue;
    if (op.GetAttr<int32_t>("ring_id") != kMpRing) continue;
    // Inside a split op (op-split) the next part's GEMM already hides this
    // all-reduce; the cut goes after the last part's.
    const Op& next = *ops[k + 1];
    if (next.desc().creation_pass() == "op-split" && next.type() != "concat") continue;
    cuts.push_back(k + 1);
  }
  return cuts;
}

struct ScheduleOptions {
  const ScheduleInfo* mode = DefaultSchedule();
  int64_t micro_batches = 0;  // 0: as gradient-accumulation split the batch
  int64_t max_in_flight = 0;  // 0: as many as the schedule wants
};

class SchedulePass : public Pass {
 public:
  explicit SchedulePass(const ScheduleOptions& options)
      : schedule_(options.mode),
        micro_batches_(options.micro_batches),
        max_in_flight_(static_cast<int>(options.max_in_flight)) {}
  StatusOr<bool> Run(PassContext& ctx) override;

 private:
  const ScheduleInfo* schedule_;
  int64_t micro_batches_;
  int max_in_flight_;
};

StatusOr<bool> SchedulePass::Run(PassContext& ctx) {
  if (micro_batches_ == 0) micro_batches_ = ctx.micro_batches();
  // Gradient accumulation scaled the loss for its micro-batch count; a
  // schedule over another count would train on a wrongly scaled gradient.
  if (ctx.resolved().has_micro_batches() && ctx.resolved().micro_batches() != micro_batches_) {
    return InvalidArgument("micro-batches=", micro_batches_, " but the batch was split into ",
                           ctx.resolved().micro_batches(), " micro-batches");
  }
  const ScheduleInfo* schedule = schedule_;
  const std::string mode = schedule->name;
  ctx.resolved().set_schedule_mode(mode);
  ctx.resolved().set_micro_batches(static_cast<int32_t>(micro_batches_));
  ctx.resolved().set_max_in_flight(max_in_flight_);
  WorkingPlan& plan = ctx.plan();
  const bool has_split = plan.programs.count({JobType::kBackwardB, 0}) > 0;
  if (schedule->splits_backward && !has_split) {
    return FailedPrecondition("schedule ", mode,
                              " runs B and W jobs: run split-backward before job-split");
  }
  if (!schedule->splits_backward && has_split) {
    return FailedPrecondition("schedule ", mode,
                              " runs whole backward jobs, but the backward was split");
  }
  ScheduleParams params{ctx.coords().pp, std::max(1, ctx.pp_degree()),
                        static_cast<int>(micro_batches_), plan.num_chunks};
  params.max_in_flight = max_in_flight_;
  if (schedule->splits_jobs) {
    for (auto [type, cuts] : {std::make_pair(JobType::kForward, &params.forward_cuts),
                              std::make_pair(JobType::kBackward, &params.backward_cuts)}) {
      auto it = plan.programs.find({type, 0});
      if (it == plan.programs.end()) {
        return FailedPrecondition("schedule ", mode, " needs the ", JobTypeName(type),
                                  " program: run job-split first");
      }
      *cuts = CutsAfterMpCollectives(it->second);
      std::string at;
      for (int c : *cuts) at += StrCat(at.empty() ? "" : ",", c);
      ctx.Explain(kPassName, StrCat(JobTypeName(type), " cut into ", cuts->size() + 1,
                                    " parts after its tensor-parallel all-reduces (parts start "
                                    "at ops ", at.empty() ? "-" : at, ")"));
    }
  }
  LOOM_ASSIGN_OR_RETURN(plan.jobs, schedule->fn(params));
  ctx.Explain(kPassName, StrCat(mode, " over ", micro_batches_,
                                " micro-batches: ", plan.jobs.size(), " jobs"));
  return true;
}

}  // namespace

std::vector<std::pair<std::string, const ScheduleInfo*>> ScheduleChoices() {
  std::vector<std::pair<std::string, const ScheduleInfo*>> choices;
  for (const ScheduleInfo& s : Schedules()) choices.emplace_back(s.name, &s);
  return choices;
}

PassInfo SchedulePassInfo() {
  using O = ScheduleOptions;
  PassInfo info =
      PassInfoOf<SchedulePass, O>(kPassName, "orders the rank's jobs by the pipeline schedule");
  info.options = {
      EnumOption(&O::mode, "mode", "the pipeline schedule", ScheduleChoices()),
      IntOption(&O::micro_batches, "micro-batches",
                "micro-batches a step (0: as gradient-accumulation split the batch)", 0,
                kMaxWorldSize),
      IntOption(&O::max_in_flight, "max-in-flight",
                "1F1B-overlap: the most micro-batches in flight on a stage (0: the "
                "schedule's own)",
                0, kMaxWorldSize)};
  info.requires_passes = {"job-split"};
  return info;
}

}  // namespace loom
