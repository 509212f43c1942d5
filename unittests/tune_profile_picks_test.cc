// Which candidates `loom tune --profile_ops` profiles (profiling/
// tune_profile_picks.h): every op a candidate runs is picked once, from
// the plainest candidate that runs it, and what the table has is not
// picked again.
#include "profiling/tune_profile_picks.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "cost_model/cluster.h"
#include "cost_model/cost_context.h"
#include "cost_model/op_cost_model.h"
#include "framework/op_work.h"
#include "profiling/plan_op_profile.h"
#include "runtime/gpt_plan.h"

namespace loom {
namespace {

class TuneProfilePicksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = GptPreset("gpt-tiny").value();
    config_.num_layers = 2;
    config_.batch_size = 8;
    const proto::Cluster cluster = LoadCluster("local").value();
    costs_ = std::make_unique<CostContext>(cluster, CostTable());
    plan_options_.costs = costs_.get();
    plan_options_.cut_by_flops = true;
    TuneSpace space;
    space.devices = 2;
    StatusOr<TuneSpaceResult> r =
        EnumerateTuneSpace(config_, OptimizerConfig(), proto::Strategy(), *costs_, space, 0);
    ASSERT_TRUE(r.ok()) << r.status();
    candidates_ = r->candidates;
  }

  // The signatures of `c`'s plan that the table must price.
  std::set<std::string> Needed(const TuneCandidate& c) {
    StatusOr<Plan> plan = PlanGpt(config_, OptimizerConfig(), c.strategy, {}, plan_options_);
    EXPECT_TRUE(plan.ok()) << c.name << ": " << plan.status();
    std::set<std::string> out;
    if (!plan.ok()) return out;
    for (const Op* op : DistinctSignatureOps(PlanBlocks(*plan))) {
      if (NoWorkView(op->type(), WorkOf(*op)) || !UnprofilableReason(*op, {}).empty()) continue;
      out.insert(OpSignature(*op));
    }
    return out;
  }

  StatusOr<std::vector<ProfilePick>> Picks(const CostTable& table) {
    return PicksToProfile(config_, OptimizerConfig(), candidates_, table, "local", {},
                          plan_options_);
  }

  GptConfig config_;
  std::unique_ptr<CostContext> costs_;
  PlanOptions plan_options_;
  std::vector<TuneCandidate> candidates_;
};

TEST_F(TuneProfilePicksTest, EachOpOnceFromThePlainestCandidateThatRunsIt) {
  ASSERT_GT(candidates_.size(), 50u);
  StatusOr<std::vector<ProfilePick>> picks = Picks(CostTable());
  ASSERT_TRUE(picks.ok()) << picks.status();
  ASSERT_FALSE(picks->empty());
  // Whose pick each signature is.
  std::map<std::string, size_t> picked_by;
  for (const ProfilePick& p : *picks) {
    for (const std::string& s : p.signatures) {
      EXPECT_TRUE(picked_by.emplace(s, p.candidate).second) << s << " picked twice";
    }
  }
  std::set<std::string> needed_by_any;
  bool zero_pick = false;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const proto::Strategy& s = candidates_[i].strategy;
    for (const std::string& sig : Needed(candidates_[i])) {
      needed_by_any.insert(sig);
      auto it = picked_by.find(sig);
      ASSERT_NE(it, picked_by.end()) << sig << " of " << candidates_[i].name << " not picked";
      // No plainer candidate runs it than the one that was picked.
      const proto::Strategy& pick = candidates_[it->second].strategy;
      const bool rc = s.recompute().granularity() != "none";
      const bool pick_rc = pick.recompute().granularity() != "none";
      EXPECT_LE(pick_rc, rc) << sig << ": picked from " << candidates_[it->second].name << ", yet "
                             << candidates_[i].name << " runs it";
      if (pick_rc == rc) {
        EXPECT_LE(pick.sharding().stage(), s.sharding().stage())
            << sig << ": picked from " << candidates_[it->second].name << ", yet "
            << candidates_[i].name << " runs it";
      }
    }
  }
  // Nothing picked that no candidate runs.
  EXPECT_EQ(picked_by.size(), needed_by_any.size());
  // The first pick is a plain plan, and a sharded one is picked only for
  // the ops sharding adds: the matmuls come from plans without it.
  EXPECT_EQ(candidates_[picks->front().candidate].strategy.sharding().stage(), 0);
  for (const ProfilePick& p : *picks) {
    const proto::Strategy& s = candidates_[p.candidate].strategy;
    EXPECT_EQ(s.recompute().granularity(), "none") << candidates_[p.candidate].name;
    if (s.sharding().stage() == 0) continue;
    zero_pick = true;
    for (const std::string& sig : p.signatures) {
      EXPECT_NE(sig.rfind("matmul", 0), 0u) << sig << " from " << candidates_[p.candidate].name;
    }
  }
  EXPECT_TRUE(zero_pick) << "the space's ZeRO plans add no ops of their own";
}

TEST_F(TuneProfilePicksTest, WhatTheTableHasIsNotPickedAgain) {
  StatusOr<std::vector<ProfilePick>> picks = Picks(CostTable());
  ASSERT_TRUE(picks.ok()) << picks.status();
  ASSERT_GT(picks->size(), 1u);
  // The first pick's ops in the table, as its profile would put them.
  std::vector<proto::CostEntry> entries;
  for (const std::string& s : picks->front().signatures) {
    proto::CostEntry e;
    e.set_signature(s);
    e.set_op_type(s.substr(0, s.find(' ')));
    e.set_median_seconds(1e-5);
    e.set_samples(1);
    e.set_runs_per_sample(1);
    e.set_device("local");
    entries.push_back(e);
  }
  CostTable table;
  table.Merge(entries);
  StatusOr<std::vector<ProfilePick>> rest = Picks(table);
  ASSERT_TRUE(rest.ok()) << rest.status();
  ASSERT_EQ(rest->size(), picks->size() - 1);
  for (size_t i = 0; i < rest->size(); ++i) {
    EXPECT_EQ((*rest)[i].candidate, (*picks)[i + 1].candidate);
    EXPECT_EQ((*rest)[i].signatures, (*picks)[i + 1].signatures);
  }
  // A table with every op: nothing to profile.
  for (const ProfilePick& p : *rest) {
    for (const std::string& s : p.signatures) {
      proto::CostEntry e = entries.front();
      e.set_signature(s);
      e.set_op_type(s.substr(0, s.find(' ')));
      table.Merge({e});
    }
  }
  StatusOr<std::vector<ProfilePick>> none = Picks(table);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

}  // namespace
}  // namespace loom
