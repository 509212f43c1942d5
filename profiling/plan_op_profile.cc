#include "profiling/plan_op_profile.h"

#include <algorithm>
#include <map>
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

namespace {

// Per signature, the timing of the median round (the lower of two).
std::vector<OpTiming> MedianRounds(const std::vector<std::vector<OpTiming>>& rounds) {
  std::map<std::string, std::vector<const OpTiming*>> by_signature;
  std::vector<std::string> order;  // first seen first
  for (const std::vector<OpTiming>& round : rounds) {
    for (const OpTiming& t : round) {
      auto& runs = by_signature[t.signature];
      if (runs.empty()) order.push_back(t.signature);
      runs.push_back(&t);
    }
  }
  std::vector<OpTiming> out;
  for (const std::string& signature : order) {
    std::vector<const OpTiming*>& runs = by_signature[signature];
    std::sort(runs.begin(), runs.end(), [](const OpTiming* a, const OpTiming* b) {
      return a->median_seconds < b->median_seconds;
    });
    OpTiming t = *runs[(runs.size() - 1) / 2];
    t.samples = 0;
    for (const OpTiming* r : runs) t.samples += r->samples;
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

StatusOr<std::vector<PlanOpProfile>> ProfilePlansInRounds(
    const GptConfig& config, const std::vector<const Plan*>& plans, int rounds,
    const PlanOpProfileOptions& options, const std::function<void(int, size_t)>& progress) {
  if (rounds < 1) return InvalidArgument("rounds must be at least 1, got ", rounds);
  PlanOpProfileOptions round_options = options;
  round_options.step.steps = std::max(1, options.step.steps / rounds);
  round_options.alone.samples = std::max(1, options.alone.samples / rounds);
  // Each plan's profile in each round, [plan][round].
  std::vector<std::vector<PlanOpProfile>> taken(plans.size());
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < plans.size(); ++i) {
      if (progress) progress(round, i);
      LOOM_ASSIGN_OR_RETURN(PlanOpProfile p, ProfilePlanOps(config, *plans[i], round_options));
      taken[i].push_back(std::move(p));
    }
  }
  std::vector<PlanOpProfile> out(plans.size());
  for (size_t i = 0; i < plans.size(); ++i) {
    std::vector<std::vector<OpTiming>> in_step, alone;
    for (PlanOpProfile& p : taken[i]) {
      if (p.in_step) in_step.push_back(std::move(p.in_step->timings));
      alone.push_back(std::move(p.alone.timed));
    }
    if (!in_step.empty()) {
      out[i].in_step.emplace();
      out[i].in_step->timings = MedianRounds(in_step);
    }
    out[i].alone.timed = MedianRounds(alone);
    out[i].alone.skipped = taken[i].front().alone.skipped;
  }
  return out;
}

}  // namespace loom
