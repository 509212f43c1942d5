// The plan verifier over hand-built pipeline plans (plan_verifier_test_util.h):
// valid plans under the real schedules, and one broken plan per check of
// the pipeline's traffic: deadlock, mismatched transfers, unmatched sends
// and recvs, events nobody records. plan_verifier_flow_test.cc has the rest.
#include "scheduler/plan_verifier.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "unittests/plan_verifier_test_util.h"

namespace loom {
namespace {

// ---------------------------------------------------------------------------
// Valid plans.

TEST(PlanVerifier, AcceptsTwoStagesUnderFThenBAnd1F1B) {
  for (const char* schedule : {"FThenB", "1F1B"}) {
    PipelineOptions o;
    o.schedule = schedule;
    Plan plan = BuildPlan(o);
    PlanVerifyStats stats;
    Status st = VerifyPlan(plan, &stats);
    EXPECT_TRUE(st.ok()) << schedule << ": " << st;
    // 4 micro-batches, one tensor each way.
    EXPECT_EQ(stats.transfers, 8) << schedule;
    // Two dp allreduces per rank, each its own group of one.
    EXPECT_EQ(stats.collectives, 4) << schedule;
    int64_t ops = 0;
    for (const RankPlan& rp : plan.ranks) {
      for (const Job& j : rp.jobs) {
        ops += rp.ProgramFor(j)->global_block().num_ops();
      }
    }
    EXPECT_EQ(stats.ops, ops) << schedule;
  }
}

TEST(PlanVerifier, AcceptsDeeperWiderPipelinesUnderEverySchedule) {
  for (const char* schedule : {"FThenB", "1F1B", "Eager1F1B"}) {
    PipelineOptions o;
    o.schedule = schedule;
    o.pp = 4;
    o.dp = 2;
    o.micro_batches = 8;  // Eager1F1B needs 2 * pp - 1
    o.chain = 5;
    o.sends = 3;
    Plan plan = BuildPlan(o);
    PlanVerifyStats stats;
    Status st = VerifyPlan(plan, &stats);
    EXPECT_TRUE(st.ok()) << schedule << ": " << st;
    // 2 dp pipelines x 3 boundaries x 8 micro-batches x 3 tensors x 2 ways.
    EXPECT_EQ(stats.transfers, 2 * 3 * 8 * 3 * 2) << schedule;
    // 4 dp groups of two ranks, two allreduces each.
    EXPECT_EQ(stats.collectives, 4 * 2) << schedule;
  }
}

// ---------------------------------------------------------------------------
// Deadlock.

TEST(PlanVerifier, RejectsASendRecvOrderThatDeadlocks) {
  PipelineOptions o;
  o.micro_batches = 2;
  Plan plan = BuildPlan(o);
  // Stage 0 waits for B0's gradient before it sends F1's activation; stage 1
  // runs both forwards before any backward, so it waits for that activation.
  plan.ranks[0].jobs = Jobs("F0 B0 F1 B1 O");
  plan.ranks[1].jobs = Jobs("F0 F1 B0 B1 O");
  EXPECT_ERROR_HAS(
      VerifyPlan(plan),
      "deadlock: rank 0 (dp=0 mp=0 pp=0), job 1 (B0), op 0 (recv) on stream "
      "p2p_recv waits for its send from rank 1; rank 1 (dp=0 mp=0 pp=1), job "
      "2 (B0), op 6 (send) on stream p2p_send waits for job 2 (B0), op 5 "
      "(scale) on stream calc; rank 1 (dp=0 mp=0 pp=1), job 1 (F1), op 1 "
      "(elementwise_mul) on stream calc waits for job 1 (F1), op 0 (recv) on "
      "stream p2p_recv");
}

TEST(PlanVerifier, RejectsACollectiveThatDeadlocksWithARecv) {
  PipelineOptions o;
  Plan plan = BuildPlan(o);
  // Both stages allreduce a parameter over the pp ring in the forward:
  // stage 0 before it sends, stage 1 after it receives.
  Block& f0 = ProgramOf(plan, 0, JobType::kForward);
  Block& f1 = ProgramOf(plan, 1, JobType::kForward);
  Declare(f0, "shared", kBias, true);
  Declare(f1, "shared", kBias, true);
  ASSERT_TRUE(
      InsertOpInferShapes(f0, f0.front(),
                          OpDescBuilder("allreduce")
                              .Input("X", "shared")
                              .Output("Out", "shared")
                              .Attr("ring_id", static_cast<int32_t>(kPpRing)))
          .ok());
  Allreduce(f1, "shared", kPpRing);
  EXPECT_ERROR_HAS(VerifyPlan(plan),
                   "deadlock: rank 0 (dp=0 mp=0 pp=0), job 0 (F0), op 0 "
                   "(allreduce) on stream calc waits in call 0 on ring pp for "
                   "rank 1 (1 of 2 ranks arrived); rank 1 (dp=0 mp=0 pp=1), "
                   "job 0 (F0), op 1 (elementwise_mul) on stream calc waits "
                   "for job 0 (F0), op 0 (recv) on stream p2p_recv");
}

// ---------------------------------------------------------------------------
// Transfers.

TEST(PlanVerifier, RejectsASendWhoseShapeDiffersFromTheRecv) {
  Plan plan = BuildPlan(PipelineOptions{});
  Op* recv = FirstOp(ProgramOf(plan, 1, JobType::kForward), "recv");
  recv->SetAttr<std::vector<int64_t>>("out_shape", {kBatch, kHidden + 1});
  const int send = FirstOpIndex(ProgramOf(plan, 0, JobType::kForward), "send");
  EXPECT_ERROR_HAS(VerifyPlan(plan),
                   StrCat("rank 0 (dp=0 mp=0 pp=0), job 0 (F0): op ", send,
                          " (send): sends var 'act0.0' (micro-batch 0, "
                          "fp32[2, 8]), but its matching recv"),
                   "rank 1 (dp=0 mp=0 pp=1), job 0 (F0): op 0 (recv), "
                   "receives 'act0.0' (micro-batch 0, fp32[2, 9]); they "
                   "differ in shape");
}

TEST(PlanVerifier, RejectsATransferWhoseVarNamesDiffer) {
  Plan plan = BuildPlan(PipelineOptions{});
  ASSERT_TRUE(
      ProgramOf(plan, 1, JobType::kForward).RenameVar("act0.0", "other").ok());
  EXPECT_ERROR_HAS(VerifyPlan(plan), "sends var 'act0.0'", "receives 'other'",
                   "differ in var");
}

TEST(PlanVerifier, RejectsASendThatIsNeverReceived) {
  Plan plan = BuildPlan(PipelineOptions{});
  Block& opt = ProgramOf(plan, 0, JobType::kOptimizer);
  const int index = static_cast<int>(opt.num_ops());
  Send(opt, "lr", 1);
  // 1F1B on stage 0 of 2 with 4 micro-batches: the optimizer is job 8.
  EXPECT_ERROR_HAS(VerifyPlan(plan),
                   StrCat("rank 0 (dp=0 mp=0 pp=0), job 8 (O): op ", index,
                          " (send): sends var 'lr' to rank 1 (dp=0 mp=0 "
                          "pp=1), which never receives it: rank 0 sends 5 "
                          "tensors to rank 1, which receives 4 from it"));
}

TEST(PlanVerifier, RejectsARecvWhoseSenderNeverSends) {
  Plan plan = BuildPlan(PipelineOptions{});
  Block& opt = ProgramOf(plan, 1, JobType::kOptimizer);
  Recv(opt, "extra", 0);
  EXPECT_ERROR_HAS(VerifyPlan(plan), "(recv): receives var 'extra' from rank 0",
                   "which never sends it: rank 0 sends 4 tensors to rank 1, "
                   "which receives 5 from it");
}

// ---------------------------------------------------------------------------
// Events.

TEST(PlanVerifier, RejectsAnEventNobodyRecords) {
  Plan plan = BuildPlan(PipelineOptions{});
  Block& bwd = ProgramOf(plan, 1, JobType::kBackward);
  bwd.back()->annotations().add_wait_events("never.recorded");
  // Stage 1 of 2 under 1F1B: F0 B0 ...; B0 is job 1.
  EXPECT_ERROR_HAS(
      VerifyPlan(plan),
      StrCat("rank 1 (dp=0 mp=0 pp=1), job 1 (B0): op ", bwd.num_ops() - 1,
             " (", bwd.back()->type(),
             "): waits on event 'never.recorded', which no op of this "
             "rank records in micro-batch 0 or in the optimizer job"));
}

TEST(PlanVerifier, RejectsAnOptimizerWaitOnAnUnrecordedEvent) {
  Plan plan = BuildPlan(PipelineOptions{});
  Block& opt = ProgramOf(plan, 0, JobType::kOptimizer);
  // The allreduce's record is the only one of this name; drop it.
  FirstOp(opt, "allreduce")->annotations().clear_record_events();
  EXPECT_ERROR_HAS(VerifyPlan(plan),
                   "job 8 (O): op 2 (sgd): waits on event "
                   "'w0.reduced', which no op of this rank "
                   "records");
}

}  // namespace
}  // namespace loom
