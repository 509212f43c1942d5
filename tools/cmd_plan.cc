// loom plan: the per-rank plan a strategy gives a preset.
#include <chrono>
#include <iostream>

#include "passes/planner.h"
#include "scheduler/plan_verifier.h"
#include "tools/command.h"
#include "tools/common_flags.h"

DEFINE_bool(json, false, "print the plan as one JSON document");
DEFINE_bool(all_ranks, true, "plan every rank (off: only --rank)");
DECLARE_bool(explain);
DECLARE_bool(verify_each);

namespace loom {

Status RunPlan(const std::vector<std::string>& args) {
  if (!args.empty()) return InvalidArgument("unexpected argument '", args[0], "'");
  LOOM_ASSIGN_OR_RETURN(proto::Strategy strategy, StrategyFromFlags());
  LOOM_ASSIGN_OR_RETURN(GptConfig config, GptConfigFromFlags());
  LOOM_ASSIGN_OR_RETURN(OptimizerConfig opt, OptimizerConfigFromFlags());
  LOOM_ASSIGN_OR_RETURN(TrainingProgram tp, BuildGptTrainingProgram(config, opt));
  std::vector<int> ranks;
  gflags::CommandLineFlagInfo rank_flag;
  gflags::GetCommandLineFlagInfo("rank", &rank_flag);
  if (!FLAGS_all_ranks || !rank_flag.is_default) ranks.push_back(FLAGS_rank);
  PlanOptions options;
  options.pass_manager.verify_each = FLAGS_verify_each;
  std::vector<std::string> remarks;
  if (FLAGS_explain) options.remarks = &remarks;
  auto start = std::chrono::steady_clock::now();
  LOOM_ASSIGN_OR_RETURN(Plan plan, PlanRanks(tp.main, tp.startup, strategy, ranks, options));
  const double ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - start).count();
  // A plan of every rank is checked as a whole: pairing, collectives,
  // deadlock freedom.
  const bool whole = static_cast<int>(plan.ranks.size()) == plan.layout.world_size();
  if (whole) LOOM_RETURN_IF_ERROR(VerifyPlan(plan).WithContext("plan verifier"));
  if (FLAGS_json) {
    std::cout << PlanToJson(plan) << "\n";
    return Status::OK();
  }
  std::cout << "plan: " << config.name << ", dp=" << plan.layout.dp
            << " mp=" << plan.layout.mp << " pp=" << plan.layout.pp << ", "
            << strategy.pipeline().schedule_mode() << " over "
            << strategy.pipeline().micro_batches() << " micro-batches; "
            << plan.ranks.size() << " rank(s) planned in " << ms << " ms"
            << (whole ? ", verified" : "") << "\n";
  for (const std::string& r : remarks) std::cout << "// " << r << "\n";
  std::cout << PlanToText(plan);
  return Status::OK();
}

}  // namespace loom
