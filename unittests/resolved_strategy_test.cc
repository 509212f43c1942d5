// Passes read the strategy and never write it: what they resolve (from
// their options or the strategy) goes into the resolved record the rank's
// plan carries, and later passes read that record.
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "models/gpt.h"
#include "passes/planner.h"

namespace loom {
namespace {

using google::protobuf::util::MessageDifferencer;

TrainingProgram Tiny() {
  GptConfig c = GptPreset("gpt-tiny").value();
  return BuildGptTrainingProgram(c).value();
}

TEST(ResolvedStrategy, TheDefaultPipelineLeavesTheStrategyAlone) {
  TrainingProgram tp = Tiny();
  const proto::Strategy strategy = MakeStrategy(2, 2, 2, 2, "ZBH1");
  PassContext ctx(strategy, 5, tp.main.Clone(), tp.startup.Clone());
  PassManager pm;
  ASSERT_TRUE(pm.AddPipeline(DefaultPipeline(strategy).value()).ok());
  Status s = pm.Run(ctx);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(MessageDifferencer::Equals(ctx.strategy(), strategy))
      << ctx.strategy().DebugString();
  const proto::ResolvedStrategy& r = ctx.resolved();
  EXPECT_EQ(r.dp_degree(), 2);
  EXPECT_EQ(r.mp_degree(), 2);
  EXPECT_EQ(r.pp_degree(), 2);
  EXPECT_EQ(r.vpp_degree(), 1);
  EXPECT_EQ(r.micro_batches(), 2);
  EXPECT_EQ(r.schedule_mode(), "ZBH1");
  // The strategy leaves the size to the cost model, which chose one.
  EXPECT_EQ(strategy.dp().bucket_size_bytes(), 0);
  EXPECT_GT(r.dp_bucket_bytes(), 0);
  // The rank plan carries the record, with the pipeline the planner ran.
  auto plan = PlanRank(tp.main, tp.startup, strategy, 5);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->resolved.schedule_mode(), "ZBH1");
  EXPECT_EQ(plan->resolved.pipeline(),
            "pipeline-split,tensor-parallel,gradient-accumulation,data-parallel,"
            "split-backward,job-split,schedule");
  // The pipeline round-trips through the parser.
  EXPECT_EQ(PrintPipeline(ParsePipeline(plan->resolved.pipeline()).value()),
            plan->resolved.pipeline());
}

TEST(ResolvedStrategy, PassOptionsOverrideTheStrategyOnlyInTheRecord) {
  TrainingProgram tp = Tiny();
  const proto::Strategy strategy;  // every degree 1, one micro-batch
  // Rank 3 of mp=2 x pp=2: the last stage, mp rank 1.
  PassContext ctx(strategy, 3, tp.main.Clone(), tp.startup.Clone());
  PassManager pm;
  ASSERT_TRUE(pm.AddPipeline("tensor-parallel{degree=2},pipeline-split{stages=2},"
                             "gradient-accumulation{steps=4},data-parallel,job-split,"
                             "schedule{mode=FThenB}")
                  .ok());
  Status s = pm.Run(ctx);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(MessageDifferencer::Equals(ctx.strategy(), strategy))
      << ctx.strategy().DebugString();
  EXPECT_EQ(ctx.resolved().mp_degree(), 2);
  EXPECT_EQ(ctx.resolved().pp_degree(), 2);
  EXPECT_EQ(ctx.resolved().micro_batches(), 4);
  EXPECT_EQ(ctx.resolved().schedule_mode(), "FThenB");
  EXPECT_EQ(ctx.coords(), (RankCoords{0, 1, 1}));
  // The schedule took the micro-batches gradient accumulation resolved.
  EXPECT_EQ(JobListToString(ctx.plan().jobs), "F0 F1 F2 F3 B0 B1 B2 B3 O");
}

TEST(ResolvedStrategy, AScheduleOverOtherMicroBatchesIsRejected) {
  TrainingProgram tp = Tiny();
  PassContext ctx(proto::Strategy(), 0, tp.main.Clone(), tp.startup.Clone());
  PassManager pm;
  ASSERT_TRUE(pm.AddPipeline("gradient-accumulation{steps=2},job-split,"
                             "schedule{micro-batches=4}")
                  .ok());
  EXPECT_EQ(pm.Run(ctx).message(),
            "schedule: micro-batches=4 but the batch was split into 2 micro-batches");
}

}  // namespace
}  // namespace loom
