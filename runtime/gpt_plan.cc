#include "runtime/gpt_plan.h"

namespace loom {

StatusOr<Plan> PlanGpt(const GptConfig& config, const OptimizerConfig& optimizer,
                       const proto::Strategy& strategy, const std::vector<int>& ranks,
                       const PlanOptions& options) {
  LOOM_ASSIGN_OR_RETURN(TrainingProgram tp, BuildGptTrainingProgram(config, optimizer));
  LOOM_ASSIGN_OR_RETURN(Plan plan, PlanRanks(tp.main, tp.startup, strategy, ranks, options));
  plan.model_name = config.name;
  plan.model_config = GptConfigToMap(config);
  return plan;
}

StatusOr<GptConfig> GptConfigOfPlan(const Plan& plan) {
  if (plan.model_config.empty()) {
    return InvalidArgument("the plan records no model config (model.config is empty)");
  }
  return GptConfigFromMap(plan.model_name, plan.model_config);
}

Status CheckPlanIsFor(const Plan& plan, const GptConfig& config) {
  if (plan.model_config.empty()) return Status::OK();
  const std::map<std::string, std::string> want = GptConfigToMap(config);
  for (const auto& [key, value] : want) {
    auto it = plan.model_config.find(key);
    const std::string has = it == plan.model_config.end() ? "nothing" : it->second;
    if (has != value) {
      return InvalidArgument("the plan was built for ", key, "=", has, ", not ", value);
    }
  }
  return Status::OK();
}

}  // namespace loom
