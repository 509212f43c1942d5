#include "profiling/plan_op_profile.h"

#include <set>
#include <string>

#include "framework/op_work.h"

namespace loom {

std::vector<const Block*> PlanBlocks(const Plan& plan) {
  std::vector<const Block*> blocks;
  std::set<const void*> seen;
  for (const RankPlan& rank : plan.ranks) {
    if (!seen.insert(rank.programs_key()).second) continue;
    for (const auto& [key, program] : rank.programs()) blocks.push_back(&program.global_block());
  }
  return blocks;
}

StatusOr<PlanOpProfile> ProfilePlanOps(const GptConfig& config, const Plan& plan,
                                       const PlanOpProfileOptions& options) {
  PlanOpProfile profile;
  std::set<std::string> timed;
  if (options.in_step && options.alone.device == nullptr) {
    LOOM_ASSIGN_OR_RETURN(profile.in_step,
                          ProfileInStep(config, plan, options.step, options.step_progress));
    for (const OpTiming& t : profile.in_step->timings) timed.insert(t.signature);
  }
  std::vector<const Op*> alone;
  for (const Op* op : DistinctSignatureOps(PlanBlocks(plan))) {
    if (!timed.count(OpSignature(*op))) alone.push_back(op);
  }
  LOOM_ASSIGN_OR_RETURN(profile.alone, ProfileOps(alone, options.alone, options.alone_progress));
  return profile;
}

}  // namespace loom
