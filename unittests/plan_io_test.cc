// The Plan as an artifact: proto round trips, shared program sets, files,
// and the one-line errors a bad plan gets.
#include <google/protobuf/util/message_differencer.h>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "framework/serialization.h"
#include "runtime/gpt_plan.h"
#include "runtime/parallel_trainer.h"
#include "scheduler/plan_verifier.h"
#include "unittests/test_plan_options.h"

namespace loom {
namespace {

using google::protobuf::util::MessageDifferencer;

// Four layers, so that two stages of two VPP chunks each fit.
GptConfig TinyConfig() {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 4;
  return c;
}

Plan TinyPlan(int dp, int mp, int pp, int micro_batches, const std::string& schedule,
              int vpp = 1) {
  auto plan = PlanGpt(TinyConfig(), {}, MakeStrategy(dp, mp, pp, micro_batches, schedule, vpp), {},
                      LocalPlanOptions());
  CHECK(plan.ok()) << plan.status();
  return std::move(plan).value();
}

std::string Serialized(const Program& p) { return p.ToProto().SerializeAsString(); }

// Everything a plan holds, rank by rank, including which ranks share.
void ExpectSamePlan(const Plan& a, const Plan& b) {
  EXPECT_EQ(a.layout.dp, b.layout.dp);
  EXPECT_EQ(a.layout.mp, b.layout.mp);
  EXPECT_EQ(a.layout.pp, b.layout.pp);
  EXPECT_TRUE(MessageDifferencer::Equals(a.resolved, b.resolved));
  EXPECT_EQ(a.model_name, b.model_name);
  EXPECT_EQ(a.model_config, b.model_config);
  ASSERT_EQ(a.ranks.size(), b.ranks.size());
  for (size_t r = 0; r < a.ranks.size(); ++r) {
    SCOPED_TRACE(StrCat("rank ", r));
    const RankPlan& x = a.ranks[r];
    const RankPlan& y = b.ranks[r];
    EXPECT_EQ(x.rank, y.rank);
    EXPECT_EQ(x.coords, y.coords);
    EXPECT_EQ(x.num_chunks, y.num_chunks);
    EXPECT_EQ(JobListToString(x.jobs, true), JobListToString(y.jobs, true));
    EXPECT_TRUE(MessageDifferencer::Equals(x.resolved, y.resolved));
    ASSERT_EQ(x.programs().size(), y.programs().size());
    for (const auto& [key, program] : x.programs()) {
      ASSERT_TRUE(y.programs().count(key)) << JobProgramName(key, true);
      EXPECT_EQ(Serialized(program), Serialized(y.programs().at(key)))
          << JobProgramName(key, true);
    }
    EXPECT_EQ(Serialized(x.startup()), Serialized(y.startup()));
    for (size_t s = 0; s < r; ++s) {
      EXPECT_EQ(x.programs_key() == a.ranks[s].programs_key(),
                y.programs_key() == b.ranks[s].programs_key())
          << "sharing with rank " << s;
    }
  }
  EXPECT_EQ(PlanToJson(a), PlanToJson(b));
}

TEST(PlanProto, RoundTripKeepsJobsProgramsAndSharing) {
  for (const auto& [schedule, vpp] : {std::pair{"1F1B", 1}, std::pair{"ZBH1", 1},
                                      std::pair{"VPP", 2}}) {
    SCOPED_TRACE(schedule);
    const Plan plan = TinyPlan(2, 2, 2, 4, schedule, vpp);
    auto back = PlanFromProto(PlanToProto(plan));
    ASSERT_TRUE(back.ok()) << back.status();
    ExpectSamePlan(plan, *back);
    EXPECT_TRUE(VerifyPlan(*back).ok());
  }
}

TEST(PlanProto, RecordsWhatThePlanWasBuiltFor) {
  const Plan plan = TinyPlan(2, 1, 2, 4, "1F1B");
  const proto::PlanDesc desc = PlanToProto(plan);
  EXPECT_EQ(desc.model().name(), "gpt-tiny");
  EXPECT_EQ(desc.model().config().at("num_layers"), "4");
  EXPECT_EQ(desc.resolved().dp_degree(), 2);
  EXPECT_EQ(desc.resolved().pp_degree(), 2);
  EXPECT_EQ(desc.resolved().micro_batches(), 4);
  EXPECT_EQ(desc.resolved().schedule_mode(), "1F1B");
  EXPECT_EQ(desc.resolved().pipeline(),
            "pipeline-split{chunks=1,stages=2,v-shape=false},tensor-parallel{async-allreduce=true,degree=1},"
            "gradient-accumulation{steps=4},"
            "data-parallel{bucket-bytes=0,degree=2,for-sharding=false,reduce-dtype=fp32},"
            "job-split,"
            "schedule{max-in-flight=0,micro-batches=4,mode=1F1B}");
  auto config = GptConfigOfPlan(PlanFromProto(desc).value());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(GptConfigToMap(*config), GptConfigToMap(TinyConfig()));
}

// A plan saved before the record had the fields of sharding, op-split,
// max-in-flight and the asynchronous all-reduce still loads, with them off.
TEST(PlanProto, APlanWithoutTheNewerRecordFieldsLoads) {
  proto::PlanDesc desc = PlanToProto(TinyPlan(2, 1, 2, 4, "1F1B"));
  proto::ResolvedStrategy* r = desc.mutable_resolved();
  for (int field = proto::ResolvedStrategy::kMpAsyncAllreduceFieldNumber;
       field <= proto::ResolvedStrategy::kOpSplitPartsFieldNumber; ++field) {
    r->GetReflection()->ClearField(r, r->GetDescriptor()->FindFieldByNumber(field));
  }
  for (proto::RankPlanDesc& rank : *desc.mutable_ranks()) rank.clear_resolved();
  auto plan = PlanFromProto(desc);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->resolved.op_split());
  EXPECT_FALSE(plan->resolved.mp_async_allreduce());
  EXPECT_EQ(plan->resolved.sharding_stage(), 0);
  EXPECT_EQ(plan->resolved.max_in_flight(), 0);
  EXPECT_TRUE(VerifyPlan(*plan).ok());
}

TEST(PlanProto, DpReplicasShareOneProgramSetPerPosition) {
  const Plan plan = TinyPlan(4, 1, 2, 2, "1F1B");
  ASSERT_EQ(plan.ranks.size(), 8u);
  // One set per (pp, mp) position: two stages.
  EXPECT_EQ(CountProgramSets(plan), 2);
  for (const RankPlan& a : plan.ranks) {
    for (const RankPlan& b : plan.ranks) {
      EXPECT_EQ(a.programs_key() == b.programs_key(), a.coords.pp == b.coords.pp)
          << a.rank << " vs " << b.rank;
    }
  }
  EXPECT_EQ(PlanToProto(plan).program_sets_size(), 2);
  const Plan loaded = PlanFromProto(PlanToProto(plan)).value();
  EXPECT_EQ(CountProgramSets(loaded), 2);
}

TEST(PlanProto, EditingOneRankLeavesItsReplicasAlone) {
  Plan plan = TinyPlan(2, 1, 1, 1, "FThenB");
  ASSERT_EQ(plan.ranks[0].programs_key(), plan.ranks[1].programs_key());
  const size_t before = plan.ranks[1].programs().at({JobType::kForward, 0})
                            .global_block().num_ops();
  Block& forward = MutableProgramSet(plan.ranks[0]).programs.at({JobType::kForward, 0})
                       .global_block();
  forward.EraseOp(forward.back());
  EXPECT_NE(plan.ranks[0].programs_key(), plan.ranks[1].programs_key());
  EXPECT_EQ(plan.ranks[1].programs().at({JobType::kForward, 0}).global_block().num_ops(),
            before);
}

TEST(PlanFile, BinaryAndTextRoundTrip) {
  const Plan plan = TinyPlan(2, 2, 1, 2, "1F1B");
  for (const char* path : {"/tmp/loom_plan_io_test.plan", "/tmp/loom_plan_io_test.pbtxt"}) {
    SCOPED_TRACE(path);
    ASSERT_TRUE(SavePlan(plan, path).ok());
    auto loaded = LoadPlan(path);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    ExpectSamePlan(plan, *loaded);
    std::remove(path);
  }
}

TEST(PlanFile, TruncatedOrCorruptedFilesAreReported) {
  const std::string path = "/tmp/loom_plan_io_test_bad.plan";
  ASSERT_TRUE(SavePlan(TinyPlan(1, 1, 2, 2, "1F1B"), path).ok());
  const std::string bytes = ReadFile(path).value();
  ASSERT_TRUE(WriteFileAtomically(path, bytes.substr(0, bytes.size() / 2)).ok());
  Status s = LoadPlan(path).status();
  EXPECT_EQ(s.message(), StrCat(path, ": truncated plan: header promises ", bytes.size() - 24,
                                " bytes, file holds ", bytes.size() / 2 - 24));
  std::string flipped = bytes;
  flipped[bytes.size() / 3] ^= 0x10;
  ASSERT_TRUE(WriteFileAtomically(path, flipped).ok());
  EXPECT_EQ(LoadPlan(path).status().message(), path + ": corrupted plan: checksum mismatch");
  // A program file is not a plan.
  ASSERT_TRUE(SaveProgram(Program(), path).ok());
  EXPECT_EQ(LoadPlan(path).status().message(),
            path + ": not a Loom binary plan (bad magic; text-format files must end in .pbtxt)");
  std::remove(path.c_str());
  EXPECT_EQ(LoadPlan(path).status().message(), path + ": cannot open");
}

// A plan proto from a valid plan, broken by `edit`; the error it gets.
std::string ErrorAfter(const std::function<void(proto::PlanDesc&)>& edit) {
  proto::PlanDesc desc = PlanToProto(TinyPlan(2, 1, 2, 2, "1F1B"));
  edit(desc);
  StatusOr<Plan> plan = PlanFromProto(desc);
  if (plan.ok()) return "accepted";
  EXPECT_EQ(plan.status().message().find('\n'), std::string::npos);
  return plan.status().message();
}

TEST(PlanProto, ErrorsNameTheCulprit) {
  EXPECT_EQ(ErrorAfter([](proto::PlanDesc& d) { d.mutable_ranks(3)->set_program_set(7); }),
            "rank 3: program_set 7 does not exist (the plan has 2)");
  EXPECT_EQ(ErrorAfter([](proto::PlanDesc& d) { d.mutable_layout()->set_dp(1); }),
            "the plan lists 4 ranks but layout dp=1 mp=1 pp=2 has 2");
  EXPECT_EQ(ErrorAfter([](proto::PlanDesc& d) { d.mutable_layout()->set_mp(0); }),
            "layout.mp must be at least 1, got 0");
  EXPECT_EQ(ErrorAfter([](proto::PlanDesc& d) { d.set_sharding_degree(2); }),
            "sharding_degree 2 must be 0 or a divisor of layout.dp (2) between 2 and dp/2");
  EXPECT_EQ(ErrorAfter([](proto::PlanDesc& d) {
              d.mutable_ranks(1)->mutable_coords()->set_dp(0);
            }),
            "rank 1: coords dp=0 mp=0 pp=0 do not match the layout, which puts it at "
            "dp=1 mp=0 pp=0");
  EXPECT_EQ(ErrorAfter([](proto::PlanDesc& d) { d.mutable_ranks(2)->set_rank(3); }),
            "ranks[2] is rank 3; ranks must be listed in order from 0");
  EXPECT_EQ(ErrorAfter([](proto::PlanDesc& d) {
              d.mutable_ranks(2)->mutable_jobs(1)->set_type("fwd");
            }),
            "rank 2, job 1: unknown job type 'fwd'");
  EXPECT_EQ(ErrorAfter([](proto::PlanDesc& d) { d.mutable_ranks(0)->mutable_jobs(0)->set_chunk(1); }),
            "rank 0, job 0 (F0.1): chunk 1 is outside the rank's 1 chunk(s)");
  EXPECT_EQ(ErrorAfter([](proto::PlanDesc& d) {
              d.mutable_program_sets(1)->mutable_programs(0)->set_type("backward_w");
            }),
            "rank 2, job 0 (F0): program set 1 has no forward program");
  EXPECT_EQ(ErrorAfter([](proto::PlanDesc& d) {
              d.mutable_program_sets(0)->mutable_programs(1)->mutable_program()
                  ->mutable_blocks(0)->mutable_ops(0)->set_type("no_such_op");
            }),
            "program set 0: backward program: block 0, op 0 (no_such_op): unknown op type "
            "'no_such_op'");
}

TEST(PlanRuns, AVerifierFailureNamesThePlansSource) {
  Plan plan = TinyPlan(1, 1, 2, 2, "1F1B");
  plan.ranks[1].jobs.pop_back();  // the optimizer
  auto t = ParallelTrainer::CreateFromPlan(TinyConfig(), std::move(plan), "tiny.plan", {});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(),
            "tiny.plan: plan verifier: rank 1 (dp=0 mp=0 pp=1): no optimizer job");
}

TEST(PlanRuns, APlanRunsOnlyTheModelItWasBuiltFor) {
  GptConfig other = TinyConfig();
  other.seq_len = 16;
  auto t = ParallelTrainer::CreateFromPlan(other, TinyPlan(1, 1, 2, 2, "1F1B"), "tiny.plan", {});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "tiny.plan: the plan was built for seq_len=32, not 16");
}

TEST(PlanRuns, ALoadedPlanTrainsLikeAFreshOne) {
  const std::string path = "/tmp/loom_plan_io_test_run.plan";
  ASSERT_TRUE(SavePlan(TinyPlan(2, 1, 2, 2, "1F1B"), path).ok());
  Plan loaded = LoadPlan(path).value();
  std::remove(path.c_str());
  auto config = GptConfigOfPlan(loaded);
  ASSERT_TRUE(config.ok()) << config.status();
  auto from_file = ParallelTrainer::CreateFromPlan(*config, std::move(loaded), path, {});
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  auto fresh = ParallelTrainer::Create(TinyConfig(), {}, MakeStrategy(2, 1, 2, 2, "1F1B"), {});
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  for (int step = 0; step < 2; ++step) {
    EXPECT_EQ((*from_file)->Step(step).value(), (*fresh)->Step(step).value()) << step;
  }
}

TEST(GptConfigMap, RoundTripsAndNamesBadKeys) {
  const GptConfig c = GptPreset("gpt3-1.3b").value();
  auto back = GptConfigFromMap(c.name, GptConfigToMap(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(GptConfigToMap(*back), GptConfigToMap(c));
  auto map = GptConfigToMap(c);
  map["seq_len"] = "long";
  EXPECT_EQ(GptConfigFromMap("x", map).status().message(),
            "model config: seq_len: 'long' is not an integer");
  map = GptConfigToMap(c);
  map.erase("seed");
  EXPECT_EQ(GptConfigFromMap("x", map).status().message(), "model config: no value for seed");
  map = GptConfigToMap(c);
  map["colour"] = "blue";
  EXPECT_EQ(GptConfigFromMap("x", map).status().message(),
            "model config: unknown key 'colour'");
}

}  // namespace
}  // namespace loom
