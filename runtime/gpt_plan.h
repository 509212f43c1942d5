// Planning a GPT model: the training program, the default pass pipeline
// for every rank, and the record of what the plan was built for, so that a
// saved plan can be run without the flags that made it.
#ifndef LOOM_RUNTIME_GPT_PLAN_H_
#define LOOM_RUNTIME_GPT_PLAN_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/gpt.h"
#include "passes/planner.h"

namespace loom {

// `config`'s training program, built and prepared (PreparedPrograms) once
// for the plans of many strategies of one mixed precision: a `loom tune`
// search plans thousands.
class GptPrograms {
 public:
  static StatusOr<std::unique_ptr<GptPrograms>> Build(const GptConfig& config,
                                                      const OptimizerConfig& optimizer,
                                                      const AmpConfig& amp);

  const GptConfig& config() const { return program_.config; }

  // PlanGpt of a strategy of that mixed precision (an error otherwise).
  // Plans may be made in several threads at once.
  StatusOr<Plan> PlanOf(const CheckedStrategy& checked, const std::vector<int>& ranks = {},
                        const PlanOptions& options = {}) const;
  StatusOr<Plan> PlanOf(const proto::Strategy& strategy, const std::vector<int>& ranks = {},
                        const PlanOptions& options = {}) const;

 private:
  GptPrograms() = default;

  std::map<std::string, std::string> config_map_;  // GptConfigToMap
  std::string name_;
  TrainingProgram program_;
  std::optional<PreparedPrograms> prepared_;  // may read program_ in place
};

// Builds `config`'s training program and plans `ranks` of it under
// `strategy` (all ranks when empty). The plan records the model's name and
// config (GptConfigToMap).
StatusOr<Plan> PlanGpt(const GptConfig& config, const OptimizerConfig& optimizer,
                       const proto::Strategy& strategy, const std::vector<int>& ranks = {},
                       const PlanOptions& options = {});

// The model config a plan records; an error if it records none or a bad
// one.
StatusOr<GptConfig> GptConfigOfPlan(const Plan& plan);

// Fails, naming the first key that differs, unless `plan` was built for
// `config` or records no model at all.
Status CheckPlanIsFor(const Plan& plan, const GptConfig& config);

}  // namespace loom

#endif  // LOOM_RUNTIME_GPT_PLAN_H_
