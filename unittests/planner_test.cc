// The default pipeline end to end: strategies in, per-rank plans out.
#include "passes/planner.h"

#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "cost_model/bucket_size.h"
#include "cost_model/cluster.h"
#include "framework/op_registry.h"
#include "framework/verifier.h"
#include "models/gpt.h"
#include "passes/amp.h"
#include "scheduler/plan_verifier.h"
#include "scheduler/schedule.h"
#include "unittests/layout_sweep.h"
#include "unittests/test_plan_options.h"

namespace loom {
namespace {


TEST(Planner, EveryScheduleAtPp4With8MicroBatches) {
  TrainingProgram tp = TinyProgram(8);
  for (const ScheduleInfo& schedule : Schedules()) {
    // (1F1B-overlap needs mp > 1: OverlapCutsAtEveryMpAllReduce.)
    if (schedule.splits_jobs) continue;
    SCOPED_TRACE(schedule.name);
    const int chunks = schedule.uses_chunks ? 2 : 1;
    auto plan = PlanRanks(tp.main, tp.startup, MakeStrategy(1, 1, 4, 8, schedule.name, chunks),
                          {}, VerifiedPlanOptions());
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->ranks.size(), 4u);
    for (const RankPlan& rp : plan->ranks) {
      auto expected = schedule.fn({rp.coords.pp, 4, 8, chunks});
      ASSERT_TRUE(expected.ok());
      EXPECT_EQ(JobListToString(rp.jobs, true), JobListToString(*expected, true));
      EXPECT_EQ(rp.num_chunks, chunks);
      for (const Job& job : rp.jobs) {
        EXPECT_NE(rp.ProgramFor(job), nullptr) << JobToString(job, true);
      }
    }
    Status verified = VerifyPlan(*plan);
    EXPECT_TRUE(verified.ok()) << verified;
  }
}

// Planning every rank at once shares pipeline-split's cut and placement
// between the stages (SharedAnalyses); each rank's programs are still
// exactly those it gets planned alone, under each kind of cut.
TEST(Planner, RanksPlannedTogetherGetTheProgramsTheyGetAlone) {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 8;
  const TrainingProgram tp = BuildGptTrainingProgram(c).value();
  for (const auto& [schedule, vpp] : std::vector<std::pair<std::string, int>>{
           {"1F1B", 1}, {"VPP", 2}, {"ZBV", 2}}) {
    SCOPED_TRACE(schedule);
    const proto::Strategy s = MakeStrategy(1, 2, 4, 8, schedule, vpp);
    auto together = PlanRanks(tp.main, tp.startup, s, {}, LocalPlanOptions());
    ASSERT_TRUE(together.ok()) << together.status();
    for (const RankPlan& rp : together->ranks) {
      auto alone = PlanRank(tp.main, tp.startup, s, rp.rank, LocalPlanOptions());
      ASSERT_TRUE(alone.ok()) << alone.status();
      ASSERT_EQ(rp.programs().size(), alone->programs().size()) << "rank " << rp.rank;
      for (const auto& [key, program] : rp.programs()) {
        EXPECT_EQ(program.ToProto().SerializeAsString(),
                  alone->programs().at(key).ToProto().SerializeAsString())
            << "rank " << rp.rank;
      }
    }
  }
}

// A search plans many strategies from one prepared program, two threads at
// once: each plan is exactly PlanRanks' of the strategy, and a strategy of
// another mixed precision is refused rather than planned without its casts.
TEST(Planner, PlansFromOnePreparedProgramAreThoseOfPlanRanks) {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 4;
  const TrainingProgram tp = BuildGptTrainingProgram(c).value();
  std::vector<proto::Strategy> strategies = {MakeStrategy(1, 2, 2, 4, "1F1B"),
                                             MakeStrategy(2, 1, 2, 4, "ZBH1"),
                                             MakeStrategy(1, 2, 1, 2, "1F1B-overlap")};
  for (proto::Strategy& s : strategies) s.mutable_amp()->set_level("O2");
  const AmpConfig amp = AmpConfigOf(strategies[0]).value();
  const StatusOr<PreparedPrograms> prepared = PreparedPrograms::Prepare(tp.main, tp.startup, amp);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  std::vector<StatusOr<Plan>> shared(strategies.size(), InvalidArgument("not planned"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < strategies.size(); ++i) {
    threads.emplace_back([&, i] {
      shared[i] = PlanPrepared(*prepared, CheckStrategy(strategies[i]).value(), {},
                               LocalPlanOptions());
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < strategies.size(); ++i) {
    SCOPED_TRACE(strategies[i].pipeline().schedule_mode());
    ASSERT_TRUE(shared[i].ok()) << shared[i].status();
    auto alone = PlanRanks(tp.main, tp.startup, strategies[i], {}, LocalPlanOptions());
    ASSERT_TRUE(alone.ok()) << alone.status();
    ASSERT_EQ(shared[i]->ranks.size(), alone->ranks.size());
    for (size_t r = 0; r < alone->ranks.size(); ++r) {
      ASSERT_EQ(shared[i]->ranks[r].programs().size(), alone->ranks[r].programs().size());
      for (const auto& [key, program] : alone->ranks[r].programs()) {
        EXPECT_EQ(shared[i]->ranks[r].programs().at(key).ToProto().SerializeAsString(),
                  program.ToProto().SerializeAsString())
            << "rank " << r;
      }
    }
  }
  proto::Strategy fp32 = strategies[0];
  fp32.mutable_amp()->set_level("O0");
  const StatusOr<Plan> refused =
      PlanPrepared(*prepared, CheckStrategy(fp32).value(), {}, LocalPlanOptions());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("not the mixed precision its programs were prepared"),
            std::string::npos)
      << refused.status();
}

TEST(Planner, HybridLayoutsVerify) {
  TrainingProgram tp = TinyProgram(4);
  struct Layout { int dp, mp, pp, mb; const char* schedule; int vpp; };
  for (const Layout& l : {Layout{2, 2, 2, 4, "1F1B", 1}, Layout{1, 2, 4, 4, "ZBH1", 1},
                          Layout{4, 1, 2, 4, "Eager1F1B", 1}, Layout{1, 2, 2, 4, "VPP", 2},
                          Layout{2, 1, 2, 4, "FThenB", 1}}) {
    SCOPED_TRACE(StrCat(l.schedule, " dp=", l.dp, " mp=", l.mp, " pp=", l.pp));
    GptConfig c = GptPreset("gpt-tiny").value();
    c.num_layers = 4;
    c.batch_size = 16;
    TrainingProgram t = BuildGptTrainingProgram(c).value();
    auto plan = PlanRanks(t.main, t.startup,
                          MakeStrategy(l.dp, l.mp, l.pp, l.mb, l.schedule, l.vpp), {}, VerifiedPlanOptions());
    ASSERT_TRUE(plan.ok()) << plan.status();
    PlanVerifyStats stats;
    Status verified = VerifyPlan(*plan, &stats);
    EXPECT_TRUE(verified.ok()) << verified;
    EXPECT_GT(stats.transfers, 0);
  }
}

TEST(Planner, VerifierRejectsAHandBrokenPlan) {
  TrainingProgram tp = TinyProgram(4);
  auto plan =
      PlanRanks(tp.main, tp.startup, MakeStrategy(1, 1, 2, 2, "1F1B"), {}, LocalPlanOptions());
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Stage 1 runs its first backward before the forward it needs.
  RankPlan& last = plan->ranks[1];
  std::swap(last.jobs[0], last.jobs[1]);
  Status s = VerifyPlan(*plan);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rank 1 (dp=0 mp=0 pp=1)"), std::string::npos) << s;
}

// The bug class that once slipped through: a data-parallel all-reduce of
// gradient accumulators issued before the last addition into them.
TEST(Planner, VerifierRejectsAReductionBeforeTheLastAccumulation) {
  TrainingProgram tp = TinyProgram(2);
  auto plan =
      PlanRanks(tp.main, tp.startup, MakeStrategy(2, 1, 1, 2, "FThenB"), {}, LocalPlanOptions());
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(VerifyPlan(*plan).ok());
  Block& backward =
      MutableProgramSet(plan->ranks[0]).programs.at({JobType::kBackward, 0}).global_block();
  Op* reduce = nullptr;
  for (Op* op : backward.ops()) {
    if (op->type() == "allreduce" && op->GetAttr<int32_t>("ring_id") == kDpRing) {
      reduce = op;
      break;
    }
  }
  ASSERT_NE(reduce, nullptr);
  proto::OpDesc moved = reduce->desc();
  backward.EraseOp(reduce);
  backward.InsertOpBefore(backward.front(), moved);
  Status s = VerifyPlan(*plan);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rank 0 (dp=0 mp=0 pp=0), job 3 (B1): op 0 (allreduce) reduces '"),
            std::string::npos) << s;
  EXPECT_NE(s.message().find("' before its last write in the step, rank 0"), std::string::npos)
      << s;
}

TEST(Planner, StagesSplitTheLayersAndSendAtTheCuts) {
  TrainingProgram tp = TinyProgram(4);
  auto plan = PlanRanks(tp.main, tp.startup, MakeStrategy(1, 1, 2, 2, "1F1B"), {}, VerifiedPlanOptions());
  ASSERT_TRUE(plan.ok()) << plan.status();
  const RankPlan& first = plan->ranks[0];
  const RankPlan& last = plan->ranks[1];
  auto count = [](const Program& p, const std::string& type) {
    int n = 0;
    for (Op* op : p.global_block().ops()) n += op->type() == type;
    return n;
  };
  const Program& f0 = first.programs().at({JobType::kForward, 0});
  const Program& f1 = last.programs().at({JobType::kForward, 0});
  const Program& b0 = first.programs().at({JobType::kBackward, 0});
  const Program& b1 = last.programs().at({JobType::kBackward, 0});
  // One activation forward, one gradient back.
  EXPECT_EQ(count(f0, "send"), 1);
  EXPECT_EQ(count(f1, "recv"), 1);
  EXPECT_EQ(count(b1, "send"), 1);
  EXPECT_EQ(count(b0, "recv"), 1);
  // Embedding on the first stage, loss on the last.
  EXPECT_EQ(count(f0, "lookup_table"), 1);
  EXPECT_EQ(count(f1, "softmax_with_cross_entropy"), 1);
  EXPECT_EQ(count(f0, "softmax_with_cross_entropy"), 0);
  // The tied embedding lives on both ends, its gradient summed between them.
  for (const RankPlan* rp : {&first, &last}) {
    const Program& opt = rp->programs().at({JobType::kOptimizer, 0});
    bool updates_wte = false;
    for (Op* op : opt.global_block().ops()) {
      updates_wte |= op->type() == "adamw" && op->Input("Param") == "embed.tokens.weight";
    }
    EXPECT_TRUE(updates_wte) << "rank " << rp->rank;
  }
  // Each rank's startup initializes only what its programs hold.
  EXPECT_TRUE(first.startup().global_block().HasVar("layers.0.ln1.scale"));
  EXPECT_FALSE(first.startup().global_block().HasVar("layers.3.ln1.scale"));
  EXPECT_TRUE(last.startup().global_block().HasVar("layers.3.ln1.scale"));
}

TEST(Planner, DataParallelBucketsRunInTheLastMicroBatchOnTheDpStream) {
  TrainingProgram tp = TinyProgram(2);
  proto::Strategy s = MakeStrategy(2, 2, 2, 4, "1F1B");
  s.mutable_dp()->set_bucket_size_bytes(64 * 1024);
  auto plan = PlanRanks(tp.main, tp.startup, s, {0, 7}, VerifiedPlanOptions());
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const RankPlan& rp : plan->ranks) {
    int buckets = 0;
    for (Op* op : rp.programs().at({JobType::kBackward, 0}).global_block().ops()) {
      if (op->type() != "allreduce" || op->GetAttr<int32_t>("ring_id") != kDpRing) continue;
      ++buckets;
      EXPECT_EQ(op->desc().stream(), "dp");
      EXPECT_TRUE(op->desc().last_micro_batch_only());
      EXPECT_EQ(op->GetAttr<std::string>("reduce_op"), "avg");
    }
    EXPECT_GE(buckets, 2) << "rank " << rp.rank;
  }
  // Batch 8 over dp 2 and 4 micro-batches: one sequence per micro-batch.
  const Program& f = plan->ranks[0].programs().at({JobType::kForward, 0});
  EXPECT_EQ(f.global_block().FindVar("tokens")->shape(0), 1);
}

// dp.bucket_size_bytes unset: the cluster's model sizes the buckets (and
// says so), and planning without a cluster is an error, never a preset's
// guess; given, the size wins, and needs no cluster.
TEST(Planner, DataParallelBucketSizeComesFromTheClusterUnlessGiven) {
  TrainingProgram tp = TinyProgram(2);
  auto buckets_and_size = [&](const proto::Strategy& s, const char* cluster,
                              std::vector<std::string>* remarks) {
    std::unique_ptr<CostContext> costs;
    if (cluster != nullptr) {
      costs = std::make_unique<CostContext>(LoadCluster(cluster).value(), CostTable());
    }
    PlanOptions o = VerifiedPlanOptions();
    o.costs = costs.get();
    o.remarks = remarks;
    auto rp = PlanRank(tp.main, tp.startup, s, 0, o);
    EXPECT_TRUE(rp.ok()) << rp.status();
    int buckets = 0;
    for (Op* op : rp->programs().at({JobType::kBackward, 0}).global_block().ops()) {
      buckets += op->type() == "allreduce" && op->GetAttr<int32_t>("ring_id") == kDpRing;
    }
    return std::make_pair(buckets, rp->resolved.dp_bucket_bytes());
  };
  const proto::Strategy by_model = MakeStrategy(2, 1, 1, 1, "1F1B");
  std::vector<std::string> remarks;
  // gpt-tiny's ~0.4 MB of gradients: on the local loopback (0.8 ms
  // latency) 90% needs megabytes, so the quarter cap decides: 4 buckets.
  auto [local_buckets, local_bytes] = buckets_and_size(by_model, "local", &remarks);
  EXPECT_EQ(local_buckets, 4);
  bool explained = false;
  for (const std::string& r : remarks) {
    explained |= r.find("data-parallel: bucket ") != std::string::npos &&
                 r.find("capped at 1/4") != std::string::npos;
  }
  EXPECT_TRUE(explained) << "no bucket remark";
  // NVLink's 6 us reaches 90% sooner than loopback does.
  auto h100 = ChooseBucketBytes(CommModel(LoadCluster("h100").value()),
                                CommCall::kAllReduce, CommAlgorithm::kDirect, {0, 1},
                                int64_t{1} << 40);
  auto local = ChooseBucketBytes(CommModel(LoadCluster("local").value()),
                                 CommCall::kAllReduce, CommAlgorithm::kDirect, {0, 1},
                                 int64_t{1} << 40);
  ASSERT_TRUE(h100.ok() && local.ok());
  EXPECT_NE(h100->bytes, local->bytes);
  EXPECT_GT(local_bytes, 0);
  // A size given wins, on any cluster.
  proto::Strategy given = by_model;
  given.mutable_dp()->set_bucket_size_bytes(16 * 1024);
  auto [given_buckets, given_bytes] = buckets_and_size(given, "h100", nullptr);
  EXPECT_EQ(given_bytes, 16 * 1024);
  EXPECT_GT(given_buckets, local_buckets);
  EXPECT_EQ(buckets_and_size(given, nullptr, nullptr), std::make_pair(given_buckets, given_bytes));
  PlanOptions no_cluster = VerifiedPlanOptions();
  no_cluster.costs = nullptr;
  const Status unsized = PlanRank(tp.main, tp.startup, by_model, 0, no_cluster).status();
  EXPECT_EQ(unsized.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(
      unsized.message().find("data-parallel: sizing the gradient buckets (dp.bucket_size_bytes "
                             "unset) needs the costs of the cluster planned for"),
      std::string::npos)
      << unsized;
  // A negative size names the field.
  proto::Strategy bad = by_model;
  bad.mutable_dp()->set_bucket_size_bytes(-5);
  Status s = ValidateStrategy(bad);
  EXPECT_NE(s.message().find("dp.bucket_size_bytes"), std::string::npos) << s;
}

TEST(Planner, ImpossibleStrategiesNameTheField) {
  TrainingProgram tp = TinyProgram(4);
  auto fail = [&](const proto::Strategy& s) {
    auto plan = PlanRanks(tp.main, tp.startup, s, {0}, LocalPlanOptions());
    EXPECT_FALSE(plan.ok());
    return plan.status().message();
  };
  EXPECT_EQ(fail(MakeStrategy(1, 1, 4, 2, "1F1B")),
            "pipeline.micro_batches (2) must be at least pipeline.degree (4) for 1F1B");
  TrainingProgram eight = TinyProgram(8);
  auto vpp = PlanRanks(eight.main, eight.startup, MakeStrategy(1, 1, 2, 4, "VPP", 3), {0},
                       LocalPlanOptions());
  EXPECT_EQ(vpp.status().message(),
            "rank 0 (dp=0 mp=0 pp=0): pipeline-split: pipeline.vpp_degree (3) x "
            "pipeline.degree (2) = 6 does not divide the 8 layers");
  EXPECT_EQ(fail(MakeStrategy(1, 1, 4, 4, "VPP", 2)),
            "rank 0 (dp=0 mp=0 pp=0): pipeline-split: pipeline.degree (4) x "
            "pipeline.vpp_degree (2) = 8 virtual stages exceed the 4 layers");
  EXPECT_EQ(fail(MakeStrategy(3, 1, 1, 1, "1F1B")),
            "rank 0 (dp=0 mp=0 pp=0): data-parallel: dp.degree (3) does not divide "
            "the batch dim of data var labels [8, 32]");
  EXPECT_EQ(fail(MakeStrategy(1, 1, 1, 1, "2F2B")),
            "unknown schedule '2F2B' (known: FThenB, 1F1B, Eager1F1B, VPP, ZBH1, 1F1B-overlap, ZBV)");
  proto::Strategy off = MakeStrategy(1, 1, 2, 2, "1F1B");
  off.mutable_pipeline()->set_enable(false);
  EXPECT_EQ(fail(off), "pipeline.degree is 2 but pipeline.enable is false");
  EXPECT_EQ(ValidateStrategy(MakeStrategy(2, 2, 2, 2, "1F1B"), 6).message(),
            "dp.degree x mp.degree x pipeline.degree = 2 x 2 x 2 = 8, but the "
            "world has 6 ranks");
}

// 1F1B-overlap cuts each job after every tensor-parallel all-reduce off
// the calc stream, so that every part but the last ends with one; the plan
// verifies after each pass, the parts cover the program, and --explain
// says where it cut.
TEST(Planner, OverlapCutsAtEveryMpAllReduce) {
  TrainingProgram tp = TinyProgram(2);
  std::vector<std::string> remarks;
  PlanOptions o = VerifiedPlanOptions();
  o.remarks = &remarks;
  auto plan = PlanRanks(tp.main, tp.startup, MakeStrategy(1, 2, 2, 4, "1F1B-overlap"), {}, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const RankPlan& rp : plan->ranks) {
    SCOPED_TRACE(StrCat("rank ", rp.rank));
    int parts = 0;
    for (const Job& job : rp.jobs) {
      if (job.whole() || job.op_end < 0) continue;
      ++parts;
      const std::vector<Op*> ops = rp.ProgramFor(job)->global_block().OpVector();
      const Op& last = *ops[job.op_end - 1];
      EXPECT_EQ(CommKindOf(last.type()), CommKind::kCollective) << JobToString(job);
      EXPECT_EQ(last.desc().stream(), stream::kMp) << JobToString(job);
    }
    EXPECT_GT(parts, 0);
  }
  bool explained = false;
  for (const std::string& r : remarks) {
    explained |= r.find("backward cut into") != std::string::npos;
  }
  EXPECT_TRUE(explained);
  // mp = 1 has nothing to overlap: the error names the field.
  EXPECT_EQ(ValidateStrategy(MakeStrategy(1, 1, 2, 4, "1F1B-overlap"), 2).message(),
            "pipeline.schedule_mode 1F1B-overlap overlaps tensor-parallel all-reduces with "
            "compute, but mp.degree is 1 (there are none; use 1F1B)");
}

TEST(Planner, JsonHasRanksCoordsJobsAndPrograms) {
  TrainingProgram tp = TinyProgram(2);
  auto plan =
      PlanRanks(tp.main, tp.startup, MakeStrategy(1, 1, 2, 2, "FThenB"), {}, LocalPlanOptions());
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::string json = PlanToJson(*plan);
  EXPECT_EQ(json.rfind("{\"ranks\":[{\"rank\":0,\"coords\":{\"dp\":0,\"mp\":0,\"pp\":0},"
                       "\"jobs\":[{\"type\":\"forward\",\"micro_batch\":0,\"chunk\":0},",
                       0),
            0u)
      << json.substr(0, 200);
  EXPECT_NE(json.find("{\"type\":\"backward\",\"micro_batch\":1,\"chunk\":0}"), std::string::npos);
  EXPECT_NE(json.find("{\"type\":\"optimizer\",\"micro_batch\":0,\"chunk\":0}]"), std::string::npos);
  // Program names are sorted.
  EXPECT_NE(json.find("\"programs\":{\"backward\":[\""), std::string::npos);
  EXPECT_NE(json.find("\"forward\":[\"lookup_table\","), std::string::npos);
  EXPECT_NE(json.find("{\"rank\":1,\"coords\":{\"dp\":0,\"mp\":0,\"pp\":1}"), std::string::npos);
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

// A cluster on which the token embedding is very slow: one second for the
// lookup, FLOPs at 1 TFLOP/s for everything else.
class SlowEmbeddingCosts : public OpCostEstimator {
 public:
  StatusOr<OpCost> Estimate(const std::string& type, const std::string&,
                            const OpWork& w) const override {
    return OpCost{type == "lookup_table" ? 1.0 : w.flops * 1e-12, CostRule::kRoofline, "test"};
  }
};

// Pipeline-split balances its cut by the context's op costs: with the
// embedding that slow, the first stage keeps one layer; by FLOPs (no
// costs, or cut_by_flops as `loom run` plans) it keeps more.
TEST(Planner, CostModelMovesThePipelineCut) {
  TrainingProgram tp = TinyProgram(4);
  const proto::Strategy s = MakeStrategy(1, 1, 2, 2, "1F1B");
  SlowEmbeddingCosts slow;
  const CostContext slow_costs(LoadCluster("local").value(), slow);
  auto first_stage_layers = [&](const CostContext* costs, bool cut_by_flops = false) {
    std::vector<std::string> remarks;
    PlanOptions o;
    o.remarks = &remarks;
    o.costs = costs;
    o.cut_by_flops = cut_by_flops;
    EXPECT_TRUE(PlanRank(tp.main, tp.startup, s, 0, o).ok());
    const std::string key = "virtual stage 0 (stage 0, chunk 0): layers ";
    for (const std::string& r : remarks) {
      const size_t at = r.find(key);
      if (at != std::string::npos) return r.substr(at + key.size(), 3);
    }
    return std::string("?");
  };
  EXPECT_EQ(first_stage_layers(&slow_costs), "0-0");
  EXPECT_NE(first_stage_layers(nullptr), "0-0");
  EXPECT_EQ(first_stage_layers(&slow_costs, /*cut_by_flops=*/true), first_stage_layers(nullptr));
}

}  // namespace
}  // namespace loom
