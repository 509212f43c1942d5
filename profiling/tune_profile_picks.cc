#include "profiling/tune_profile_picks.h"

#include <algorithm>
#include <memory>
#include <numeric>
#include <set>
#include <tuple>

#include "cost_model/op_cost_model.h"
#include "framework/op_work.h"
#include "passes/amp.h"
#include "profiling/plan_op_profile.h"
#include "runtime/gpt_plan.h"

namespace loom {
namespace {

// Orders candidates plainest first (see the header).
std::tuple<bool, int, size_t> Plainness(const TuneCandidate& c, size_t index) {
  const proto::Strategy& s = c.strategy;
  return {s.recompute().granularity() != "none", s.sharding().stage(), index};
}

}  // namespace

StatusOr<std::vector<ProfilePick>> PicksToProfile(const GptConfig& config,
                                                  const OptimizerConfig& optimizer,
                                                  const std::vector<TuneCandidate>& candidates,
                                                  const CostTable& table, const std::string& device,
                                                  const OpProfileOptions& timing,
                                                  const PlanOptions& plan_options) {
  std::vector<size_t> order(candidates.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return Plainness(candidates[a], a) < Plainness(candidates[b], b);
  });
  // The candidates of a search share one AMP setting (the user's), so one
  // built program serves them all; another would fail to plan below.
  std::unique_ptr<GptPrograms> programs;
  if (!candidates.empty()) {
    LOOM_ASSIGN_OR_RETURN(const AmpConfig amp, AmpConfigOf(candidates.front().strategy));
    LOOM_ASSIGN_OR_RETURN(programs, GptPrograms::Build(config, optimizer, amp));
  }
  std::set<std::string> covered;  // in the table, or another pick's
  std::vector<ProfilePick> picks;
  for (size_t index : order) {
    StatusOr<Plan> plan = programs->PlanOf(candidates[index].strategy, {}, plan_options);
    if (!plan.ok()) continue;
    ProfilePick pick{index, {}, {}};
    for (const Op* op : DistinctSignatureOps(PlanBlocks(*plan))) {
      std::string signature = OpSignature(*op);
      if (covered.count(signature) || table.Find(signature, device) != nullptr) continue;
      if (NoWorkView(op->type(), WorkOf(*op)) || !UnprofilableReason(*op, timing).empty()) {
        continue;
      }
      covered.insert(signature);
      pick.signatures.push_back(std::move(signature));
    }
    if (pick.signatures.empty()) continue;
    pick.plan = *std::move(plan);
    picks.push_back(std::move(pick));
  }
  return picks;
}

}  // namespace loom
