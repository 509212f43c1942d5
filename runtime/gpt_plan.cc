#include "runtime/gpt_plan.h"

namespace loom {

StatusOr<std::unique_ptr<GptPrograms>> GptPrograms::Build(const GptConfig& config,
                                                          const OptimizerConfig& optimizer,
                                                          const AmpConfig& amp) {
  std::unique_ptr<GptPrograms> out(new GptPrograms());
  out->name_ = config.name;
  out->config_map_ = GptConfigToMap(config);
  LOOM_ASSIGN_OR_RETURN(out->program_, BuildGptTrainingProgram(config, optimizer));
  LOOM_ASSIGN_OR_RETURN(PreparedPrograms prepared,
                        PreparedPrograms::Prepare(out->program_.main, out->program_.startup, amp));
  out->prepared_.emplace(std::move(prepared));
  return out;
}

StatusOr<Plan> GptPrograms::PlanOf(const CheckedStrategy& checked, const std::vector<int>& ranks,
                                   const PlanOptions& options) const {
  LOOM_ASSIGN_OR_RETURN(Plan plan, PlanPrepared(*prepared_, checked, ranks, options));
  plan.model_name = name_;
  plan.model_config = config_map_;
  return plan;
}

StatusOr<Plan> GptPrograms::PlanOf(const proto::Strategy& strategy, const std::vector<int>& ranks,
                                   const PlanOptions& options) const {
  LOOM_ASSIGN_OR_RETURN(const CheckedStrategy checked, CheckStrategy(strategy));
  return PlanOf(checked, ranks, options);
}

StatusOr<Plan> PlanGpt(const GptConfig& config, const OptimizerConfig& optimizer,
                       const proto::Strategy& strategy, const std::vector<int>& ranks,
                       const PlanOptions& options) {
  LOOM_ASSIGN_OR_RETURN(const CheckedStrategy checked, CheckStrategy(strategy));
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<GptPrograms> programs,
                        GptPrograms::Build(config, optimizer, checked.amp));
  return programs->PlanOf(checked, ranks, options);
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
