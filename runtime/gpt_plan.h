// Planning a GPT model: the training program, the default pass pipeline
// for every rank, and the record of what the plan was built for, so that a
// saved plan can be run without the flags that made it.
#ifndef LOOM_RUNTIME_GPT_PLAN_H_
#define LOOM_RUNTIME_GPT_PLAN_H_

#include <vector>

#include "models/gpt.h"
#include "passes/planner.h"

namespace loom {

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
