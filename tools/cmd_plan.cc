// loom plan: the per-rank plan a strategy gives a preset; -o saves it.
#include <chrono>
#include <memory>
#include <iostream>

#include "runtime/cost_model_timer.h"
#include "runtime/gpt_plan.h"
#include "runtime/simulation.h"
#include "scheduler/plan_verifier.h"
#include "tools/command.h"
#include "tools/common_flags.h"

DEFINE_bool(json, false, "print the plan as one JSON document");
DEFINE_bool(all_ranks, true, "plan every rank (off: only --rank)");
DECLARE_bool(explain);
DECLARE_bool(verify_each);
DECLARE_string(o);

namespace loom {

Status RunPlan(const std::vector<std::string>& args) {
  if (!args.empty()) return InvalidArgument("unexpected argument '", args[0], "'");
  LOOM_ASSIGN_OR_RETURN(proto::Strategy strategy, StrategyFromFlags());
  LOOM_ASSIGN_OR_RETURN(GptConfig config, GptConfigFromFlags());
  LOOM_ASSIGN_OR_RETURN(OptimizerConfig opt, OptimizerConfigFromFlags());
  std::vector<int> ranks;
  if (!FLAGS_all_ranks || FlagGiven("rank")) {
    // A saved plan is run by every rank, so it holds them all.
    if (!FLAGS_o.empty()) {
      return InvalidArgument("-o saves every rank's plan; drop --rank and --all_ranks");
    }
    ranks.push_back(FLAGS_rank);
  }
  PlanOptions options;
  options.pass_manager.verify_each = FLAGS_verify_each;
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CostContext> costs, PlanningCostsFromFlags(&options));
  std::string memory_note;
  LOOM_RETURN_IF_ERROR(FitToMemoryFromFlags(config, opt, &strategy, &memory_note, options));
  std::vector<std::string> remarks;
  if (FLAGS_explain) options.remarks = &remarks;
  auto start = std::chrono::steady_clock::now();
  LOOM_ASSIGN_OR_RETURN(Plan plan, PlanGpt(config, opt, strategy, ranks, options));
  const double ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - start).count();
  // A plan of every rank is checked as a whole: pairing, collectives,
  // deadlock freedom.
  const bool whole = static_cast<int>(plan.ranks.size()) == plan.layout.world_size();
  if (whole) LOOM_RETURN_IF_ERROR(VerifyPlan(plan).WithContext("plan verifier"));
  if (!FLAGS_o.empty()) LOOM_RETURN_IF_ERROR(SavePlan(plan, FLAGS_o));
  if (FLAGS_json) {
    std::cout << PlanToJson(plan) << "\n";
    return Status::OK();
  }
  std::cout << "plan: " << config.name << ", dp=" << plan.layout.dp
            << " mp=" << plan.layout.mp << " pp=" << plan.layout.pp << ", "
            << plan.resolved.schedule_mode() << " over "
            << plan.resolved.micro_batches() << " micro-batches; "
            << plan.ranks.size() << " rank(s) planned in " << ms << " ms"
            << (whole ? ", verified" : "") << "\n";
  std::cout << "// pipeline: " << plan.resolved.pipeline() << "\n";
  if (!FLAGS_o.empty()) {
    std::cout << "// saved to " << FLAGS_o << ": " << CountProgramSets(plan)
              << " program set(s) for " << plan.ranks.size() << " ranks\n";
  }
  if (!memory_note.empty()) std::cout << "// " << memory_note << "\n";
  for (const std::string& r : remarks) std::cout << "// " << r << "\n";
  std::cout << PlanToText(plan);
  return Status::OK();
}

}  // namespace loom
