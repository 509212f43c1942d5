#include "profiling/plan_op_profile.h"

#include <algorithm>
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

double ProfiledSeconds(const PlanOpProfile& profile) {
  double seconds = 0;
  if (profile.in_step) {
    for (const OpTiming& t : profile.in_step->timings) {
      seconds += t.median_seconds * std::max(1, t.runs_per_sample);
    }
  }
  // An op timed alone repeats within a sample only to outlast the clock.
  for (const OpTiming& t : profile.alone.timed) seconds += t.median_seconds;
  return seconds;
}

StatusOr<RoundsProfile> ProfilePlansInRounds(
    const GptConfig& config, const std::vector<const Plan*>& plans, int rounds,
    const PlanOpProfileOptions& options, const std::function<void(int, size_t)>& progress,
    const std::function<Status(int, size_t, const RoundsProfile&)>& plan_done) {
  if (rounds < 1) return InvalidArgument("rounds must be at least 1, got ", rounds);
  PlanOpProfileOptions round_options = options;
  // At least the samples asked for, over the rounds.
  round_options.step.steps = std::max(1, (options.step.steps + rounds - 1) / rounds);
  round_options.alone.samples = std::max(1, (options.alone.samples + rounds - 1) / rounds);
  RoundsProfile out;
  out.fastest.resize(plans.size());
  out.round_seconds.resize(plans.size());
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < plans.size(); ++i) {
      if (progress) progress(round, i);
      LOOM_ASSIGN_OR_RETURN(PlanOpProfile p, ProfilePlanOps(config, *plans[i], round_options));
      const double seconds = ProfiledSeconds(p);
      std::vector<double>& seen = out.round_seconds[i];
      // Ties keep the earlier round, so that the choice is stable.
      if (seen.empty() || seconds < *std::min_element(seen.begin(), seen.end())) {
        out.fastest[i] = std::move(p);
      }
      seen.push_back(seconds);
      if (plan_done) LOOM_RETURN_IF_ERROR(plan_done(round, i, out));
    }
  }
  return out;
}

}  // namespace loom
