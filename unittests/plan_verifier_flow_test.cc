// The plan verifier over hand-built pipeline plans (plan_verifier_test_util.h),
// one broken plan per check of what the jobs compute: data flow, diverging
// collectives, missing programs and jobs that do not fit the layout; and a
// 512-rank plan that must verify in seconds.
#include "scheduler/plan_verifier.h"

#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "unittests/plan_verifier_test_util.h"

namespace loom {
namespace {

// ---------------------------------------------------------------------------
// Data flow.

TEST(PlanVerifier, RejectsAReadOfAVarNobodyWrote) {
  Plan plan = BuildPlan(PipelineOptions{});
  Block& bwd = ProgramOf(plan, 1, JobType::kBackward);
  Declare(bwd, "ghost", kAct);
  const int index = static_cast<int>(bwd.num_ops());
  Unary(bwd, "scale", "ghost", "ghost.out");
  EXPECT_ERROR_HAS(
      VerifyPlan(plan),
      StrCat("rank 1 (dp=0 mp=0 pp=1), job 1 (B0): op ", index,
             " (scale): reads var 'ghost', which is not written earlier in "
             "the program, not persistable or data, and not written by an "
             "earlier job of micro-batch 0 on this rank"));
}

TEST(PlanVerifier, RejectsAForwardReadingWhatOnlyTheBackwardWrites) {
  Plan plan = BuildPlan(PipelineOptions{});
  // The forward of micro-batch m reads g0, which only B m writes, later.
  Block& fwd = ProgramOf(plan, 1, JobType::kForward);
  Declare(fwd, "g0", kAct);
  Unary(fwd, "scale", "g0", "uses.g0");
  EXPECT_ERROR_HAS(VerifyPlan(plan), "job 0 (F0)", "reads var 'g0'");
}

TEST(PlanVerifier, OptimizerReadsTheGradientsTheBackwardWrote) {
  // One stage: the optimizer (micro-batch 0) reads w0@GRAD, which the
  // backward jobs write (into one accumulator, whatever their micro-batch).
  PipelineOptions o;
  o.pp = 1;
  Plan plan = BuildPlan(o);
  Status st = VerifyPlan(plan);
  EXPECT_TRUE(st.ok()) << st;
  // With no backward writing it, the read fails.
  Block& bwd = ProgramOf(plan, 0, JobType::kBackward);
  ASSERT_TRUE(bwd.RenameVar("w0@GRAD", "w0@GRAD.local").ok());
  EXPECT_ERROR_HAS(VerifyPlan(plan),
                   "job 8 (O): op 0 (allreduce): reads var "
                   "'w0@GRAD'",
                   "or by a backward job on this rank");
}

// ---------------------------------------------------------------------------
// Collectives.

TEST(PlanVerifier, RejectsDpRanksAllreducingInDifferentOrders) {
  PipelineOptions o;
  o.dp = 2;
  Plan plan = BuildPlan(o);
  // Rank 1 is dp=1 of stage 0.
  ASSERT_EQ(plan.ranks[1].coords, (RankCoords{1, 0, 0}));
  MutableProgramSet(plan.ranks[1]).programs.at({JobType::kOptimizer, 0}) =
      OptimizerProgram(0, /*swapped=*/true);
  EXPECT_ERROR_HAS(VerifyPlan(plan),
                   "rank 0 (dp=0 mp=0 pp=0), job 8 (O): op 0 (allreduce): "
                   "collective 0 on ring dp (allreduce, micro-batch 0, inputs "
                   "[fp32[2, 8]], reduce_op sum) does not match rank 1 (dp=1 "
                   "mp=0 pp=0), job 8 (O): op 0 (allreduce) (allreduce, "
                   "micro-batch 0, inputs [fp32[8]], reduce_op sum)");
}

TEST(PlanVerifier, RejectsADpRankWithAnExtraCollective) {
  PipelineOptions o;
  o.dp = 2;
  Plan plan = BuildPlan(o);
  Allreduce(ProgramOf(plan, 1, JobType::kOptimizer), "lr", kDpRing);
  EXPECT_ERROR_HAS(VerifyPlan(plan),
                   "rank 1 (dp=1 mp=0 pp=0), job 8 (O): op 4 (allreduce): "
                   "collective 2 on ring dp has no counterpart on rank 0",
                   "rank 0 (dp=0 mp=0 pp=0) issues 2 collectives on ring dp "
                   "but rank 1 (dp=1 mp=0 pp=0) issues 3");
}

TEST(PlanVerifier, RejectsAnUnknownRing) {
  Plan plan = BuildPlan(PipelineOptions{});
  FirstOp(ProgramOf(plan, 0, JobType::kOptimizer), "allreduce")
      ->SetAttr<int32_t>("ring_id", 0);
  EXPECT_ERROR_HAS(VerifyPlan(plan),
                   "rank 0 (dp=0 mp=0 pp=0), job 8 (O): op 0 (allreduce): "
                   "ring_id 0 is not a known ring");
}

// ---------------------------------------------------------------------------
// Jobs and programs.

TEST(PlanVerifier, RejectsAJobWithoutAProgram) {
  Plan plan = BuildPlan(PipelineOptions{});
  MutableProgramSet(plan.ranks[1]).programs.erase({JobType::kBackward, 0});
  EXPECT_ERROR_HAS(VerifyPlan(plan),
                   "rank 1 (dp=0 mp=0 pp=1), job 1 (B0): the rank has no "
                   "backward program");
}

TEST(PlanVerifier, RejectsAnInvalidJobList) {
  Plan plan = BuildPlan(PipelineOptions{});
  plan.ranks[0].jobs.pop_back();  // the optimizer
  EXPECT_ERROR_HAS(VerifyPlan(plan),
                   "rank 0 (dp=0 mp=0 pp=0): no optimizer job");
  plan = BuildPlan(PipelineOptions{});
  plan.ranks[1].jobs = Jobs("F0 B1 F1 B0 O");
  EXPECT_ERROR_HAS(VerifyPlan(plan),
                   "rank 1 (dp=0 mp=0 pp=1), job 1 (B1): "
                   "runs before its forward");
}

TEST(PlanVerifier, RejectsAPlanThatDoesNotFitItsLayout) {
  Plan plan = BuildPlan(PipelineOptions{});
  plan.ranks.pop_back();
  EXPECT_ERROR_HAS(VerifyPlan(plan),
                   "plan has 1 ranks but layout dp=1 mp=1 "
                   "pp=2 needs 2");
}

TEST(PlanVerifier, RejectsAPeerOutsideThePipeline) {
  Plan plan = BuildPlan(PipelineOptions{});
  FirstOp(ProgramOf(plan, 0, JobType::kForward), "send")
      ->SetAttr<int32_t>("peer", 2);
  EXPECT_ERROR_HAS(VerifyPlan(plan), "(send): peer 2 is not a pipeline stage");
}

// ---------------------------------------------------------------------------
// Scale: 512 ranks (pp=8, dp=64), ~200 ops per program, 8 micro-batches.

// (Times are printed, not asserted: a loaded host makes them anything.)
TEST(PlanVerifier, VerifiesA512RankPlan) {
  PipelineOptions o;
  o.pp = 8;
  o.dp = 64;
  o.micro_batches = 8;
  o.schedule = "1F1B";
  o.sends = 4;
  o.chain = 186;  // a middle stage's forward: 4 recv + 3 add + 186 + 4 + 4
  Plan plan = BuildPlan(o);
  ASSERT_EQ(plan.ranks.size(), 512u);
  const size_t fwd_ops = ProgramOf(plan, 64, JobType::kForward).num_ops();
  EXPECT_GE(fwd_ops, 195u);
  const auto start = std::chrono::steady_clock::now();
  PlanVerifyStats stats;
  Status st = VerifyPlan(plan, &stats);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  ASSERT_TRUE(st.ok()) << st;
  std::cout << "[ timing   ] 512 ranks, " << stats.ops << " ops, "
            << stats.transfers << " transfers, " << stats.collectives
            << " collectives verified in " << seconds << " s\n";
  EXPECT_EQ(stats.transfers, 64 * 7 * 8 * 4 * 2);

  // The same plan with one stage's jobs reordered into a deadlock is
  // caught.
  plan.ranks[0].jobs =
      Jobs("F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7 O");
  const auto start2 = std::chrono::steady_clock::now();
  EXPECT_ERROR_HAS(VerifyPlan(plan), "deadlock: rank 0 (dp=0 mp=0 pp=0)");
  const double seconds2 =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start2)
          .count();
  std::cout << "[ timing   ] deadlocked 512-rank plan rejected in " << seconds2
            << " s\n";
}

}  // namespace
}  // namespace loom
