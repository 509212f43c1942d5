// Passes take every value as an option (the planner writes the strategy's
// into the pipeline) and never see the strategy: what they resolve goes
// into the resolved record the rank's plan carries, and later passes read
// that record.
#include <gtest/gtest.h>

#include "models/gpt.h"
#include "passes/planner.h"
#include "unittests/test_plan_options.h"

namespace loom {
namespace {

TrainingProgram Tiny() {
  GptConfig c = GptPreset("gpt-tiny").value();
  return BuildGptTrainingProgram(c).value();
}

TEST(ResolvedStrategy, TheDefaultPipelineCarriesTheStrategy) {
  TrainingProgram tp = Tiny();
  const proto::Strategy strategy = MakeStrategy(2, 2, 2, 2, "ZBH1");
  PassContext ctx(LayoutOf(strategy), 5, tp.main.Clone(), tp.startup.Clone());
  ctx.set_costs(LocalPresetCosts().value());
  PassManager pm;
  ASSERT_TRUE(pm.AddPipeline(DefaultPipeline(strategy).value()).ok());
  Status s = pm.Run(ctx);
  ASSERT_TRUE(s.ok()) << s;
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
  auto plan = PlanRank(tp.main, tp.startup, strategy, 5, LocalPlanOptions());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->resolved.schedule_mode(), "ZBH1");
  EXPECT_EQ(plan->resolved.pipeline(),
            "pipeline-split{chunks=1,stages=2,v-shape=false},tensor-parallel{async-allreduce=true,degree=2},"
            "gradient-accumulation{steps=2},"
            "data-parallel{bucket-bytes=0,degree=2,for-sharding=false,reduce-dtype=fp32},"
            "split-backward,job-split,"
            "schedule{max-in-flight=0,micro-batches=2,mode=ZBH1}");
  EXPECT_TRUE(plan->resolved.mp_async_allreduce());
  EXPECT_EQ(plan->resolved.sharding_stage(), 0);
  EXPECT_FALSE(plan->resolved.op_split());
  // The pipeline round-trips through the parser.
  EXPECT_EQ(PrintPipeline(ParsePipeline(plan->resolved.pipeline()).value()),
            plan->resolved.pipeline());
}

TEST(ResolvedStrategy, PassOptionsResolveTheLayout) {
  TrainingProgram tp = Tiny();
  // Rank 3 of mp=2 x pp=2: the last stage, mp rank 1, though the grid the
  // context starts from is a single rank.
  PassContext ctx(ParallelLayout(), 3, tp.main.Clone(), tp.startup.Clone());
  PassManager pm;
  ASSERT_TRUE(pm.AddPipeline("tensor-parallel{degree=2},pipeline-split{stages=2},"
                             "gradient-accumulation{steps=4},data-parallel,job-split,"
                             "schedule{mode=FThenB}")
                  .ok());
  Status s = pm.Run(ctx);
  ASSERT_TRUE(s.ok()) << s;
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
  PassContext ctx(ParallelLayout(), 0, tp.main.Clone(), tp.startup.Clone());
  PassManager pm;
  ASSERT_TRUE(pm.AddPipeline("gradient-accumulation{steps=2},job-split,"
                             "schedule{micro-batches=4}")
                  .ok());
  EXPECT_EQ(pm.Run(ctx).message(),
            "schedule: micro-batches=4 but the batch was split into 2 micro-batches");
}

// Every value the run depends on is a field of the plan's record, set by
// the pass that used it, so that the trainer never reads the pipeline text;
// the text still parses back to itself.
TEST(ResolvedStrategy, ThePlanRecordsShardingOpSplitAndOverlap) {
  TrainingProgram tp = Tiny();
  proto::Strategy s = MakeStrategy(2, 2, 1, 4, "1F1B-overlap");
  s.mutable_pipeline()->set_max_in_flight(2);
  s.mutable_sharding()->set_stage(3);
  s.mutable_sharding()->set_fetch_mode("auto");
  s.mutable_sharding()->set_prefetch_depth(2);
  s.mutable_sharding()->set_keep_gathered_bytes(-1);
  s.mutable_passes()->set_op_split(true);
  s.mutable_passes()->set_op_split_parts(2);
  s.mutable_passes()->set_mp_async_allreduce_in_backward(false);
  auto plan = PlanRank(tp.main, tp.startup, s, 0, LocalPlanOptions());
  ASSERT_TRUE(plan.ok()) << plan.status();
  const proto::ResolvedStrategy& r = plan->resolved;
  EXPECT_FALSE(r.mp_async_allreduce());
  EXPECT_EQ(r.sharding_stage(), 3);
  EXPECT_EQ(r.sharding_degree(), 2);
  EXPECT_EQ(r.sharding_fetch_mode(), "auto");
  EXPECT_EQ(r.sharding_prefetch_depth(), 2);
  EXPECT_EQ(r.sharding_keep_gathered_bytes(), -1);
  EXPECT_EQ(r.max_in_flight(), 2);
  EXPECT_TRUE(r.op_split());
  EXPECT_EQ(r.op_split_parts(), 2);
  EXPECT_EQ(r.pipeline(),
            "pipeline-split{chunks=1,stages=1,v-shape=false},tensor-parallel{async-allreduce=false,degree=2},"
            "gradient-accumulation{steps=4},"
            "data-parallel{bucket-bytes=0,degree=2,for-sharding=true,reduce-dtype=fp32},"
            "sharding{degree=0,fetch-mode=auto,keep-gathered-bytes=-1,prefetch-depth=2,stage=3},"
            "op-split{max-in-flight=2,max-parts=16,parts=2,schedule=1F1B-overlap},job-split,"
            "schedule{max-in-flight=2,micro-batches=4,mode=1F1B-overlap}");
  auto parsed = PassPipeline::Parse(r.pipeline());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->ToString(), r.pipeline());
}

}  // namespace
}  // namespace loom
