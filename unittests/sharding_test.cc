// ZeRO stages 1 to 3 (the sharding pass): each dp rank holds and updates
// 1/N of every bucket's optimizer state (and under stage 2 keeps 1/N of its
// gradients, under stage 3 of its parameters, gathered before each use),
// on flat buffers, with training's numbers unchanged:
// parameters equal serial training's under SGD on dp=2 and dp=4 layouts
// with mp and pp, the unsharded run's under AdamW (bit for bit where the
// sums run in the same order), and reruns are bit-identical; the state each
// rank holds falls by N in the executor's scope; no step copies a bucket;
// checkpoints hold per-parameter state. The simulator's side is in
// sharding_simulation_test.cc.
#include <cstring>
#include <set>

#include <gtest/gtest.h>

#include "framework/op_view.h"
#include "framework/optimizer.h"
#include "framework/shape_inference.h"
#include "unittests/parameter_compare.h"
#include "unittests/test_plan_options.h"

namespace loom {
namespace {

struct Case {
  int dp, mp, pp;
  const char* schedule;
  int micro_batches;
  int vpp = 1;
  int sharding_degree = 0;  // 0: dp's; less: hybrid (groups of this many)
};

constexpr Case kCases[] = {{2, 1, 1, "FThenB", 1},     {2, 2, 2, "1F1B", 4},
                           {4, 1, 2, "ZBH1", 2},       {2, 1, 2, "VPP", 4, 2},
                           {2, 2, 1, "1F1B-overlap", 2}, {4, 2, 1, "FThenB", 1}};
// Hybrid sharding: dp=4 as two groups of 2 holding the same state.
constexpr Case kHybridCases[] = {{4, 1, 2, "1F1B", 2, 1, 2}, {4, 2, 1, "FThenB", 1, 1, 2}};

GptConfig Tiny() {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 4;
  c.batch_size = 16;
  return c;
}

proto::Strategy Sharded(const Case& k, int stage) {
  proto::Strategy s = MakeStrategy(k.dp, k.mp, k.pp, k.micro_batches, k.schedule, k.vpp);
  s.mutable_sharding()->set_stage(stage);
  if (stage > 0) s.mutable_sharding()->set_degree(k.sharding_degree);
  s.mutable_dp()->set_bucket_size_bytes(32 * 1024);  // several buckets a stage
  return s;
}

std::string Name(const Case& k) {
  return StrCat(k.schedule, " dp=", k.dp, " mp=", k.mp, " pp=", k.pp, " vpp=", k.vpp,
                " micro-batches=", k.micro_batches,
                k.sharding_degree > 0 ? StrCat(" sharding degree ", k.sharding_degree)
                                      : std::string());
}

// The ranks whose parts make a bucket whole.
int Sharing(const Case& k) { return k.sharding_degree > 0 ? k.sharding_degree : k.dp; }

std::unique_ptr<ParallelTrainer> Make(const OptimizerConfig& opt, const proto::Strategy& s) {
  ParallelTrainer::Options options;
  options.comm.timeout = std::chrono::seconds(30);
  auto t = ParallelTrainer::Create(Tiny(), opt, s, options);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(t).value() : nullptr;
}

// The optimizer state a rank's scope holds, in bytes (moments and beta
// powers; learning rate aside), as the executor allocated it.
int64_t StateBytes(ParallelTrainer& t, int rank) {
  std::set<std::string> state;
  for (const auto& [key, program] : t.plan().ranks[rank].programs()) {
    for (const std::string& v : OptimizerStateVars(program.global_block())) state.insert(v);
  }
  int64_t bytes = 0;
  for (const std::string& v : state) {
    const Tensor* tensor = t.rank_scope(rank).FindLocal(v);
    if (tensor != nullptr && tensor->initialized()) bytes += tensor->bytes();
  }
  return bytes;
}

TEST(Sharding, ParametersMatchSerialTrainingUnderSgd) {
  OptimizerConfig sgd;
  sgd.type = "sgd";
  sgd.learning_rate = 0.5f;  // large, so that a wrong gradient moves far
  std::vector<Case> cases(std::begin(kCases), std::end(kCases));
  cases.insert(cases.end(), std::begin(kHybridCases), std::end(kHybridCases));
  for (int stage : {1, 2, 3})
  for (const Case& k : cases) {
    SCOPED_TRACE(StrCat(Name(k), " stage ", stage));
    auto serial = SerialTrainer::Create(Tiny(), sgd).value();
    auto t = Make(sgd, Sharded(k, stage));
    ASSERT_NE(t, nullptr);
    for (int s = 0; s < 2; ++s) {
      ASSERT_TRUE(serial->Step(s).ok());
      auto loss = t->Step(s);
      ASSERT_TRUE(loss.ok()) << loss.status();
    }
    EXPECT_GE(ExpectEveryParameterMatches(*t, *serial, 1e-5), 4 * 12 + 4);
  }
}

// Every fetch mode and bucket size (the cost model's, one gradient a
// bucket, 32 KiB) keeps serial training's parameters; "auto" says per
// bucket which fetch it took.
TEST(Sharding, EveryFetchModeAndBucketSizeMatchesSerialTraining) {
  OptimizerConfig sgd;
  sgd.type = "sgd";
  sgd.learning_rate = 0.5f;
  for (auto [k, stage] :
       {std::pair{kCases[1], 2}, std::pair{kCases[2], 1}, std::pair{kCases[1], 3}}) {
    for (int64_t bucket : {int64_t{0}, int64_t{1}, int64_t{32 * 1024}}) {
      for (const char* fetch : {"all_gather", "all_reduce", "auto"}) {
        SCOPED_TRACE(StrCat(Name(k), " stage ", stage, " bucket ", bucket, " fetch ", fetch));
        proto::Strategy s = Sharded(k, stage);
        s.mutable_dp()->set_bucket_size_bytes(bucket);
        s.mutable_sharding()->set_fetch_mode(fetch);
        auto serial = SerialTrainer::Create(Tiny(), sgd).value();
        auto t = Make(sgd, s);
        ASSERT_NE(t, nullptr);
        for (int step = 0; step < 2; ++step) {
          ASSERT_TRUE(serial->Step(step).ok());
          ASSERT_TRUE(t->Step(step).ok());
        }
        EXPECT_GE(ExpectEveryParameterMatches(*t, *serial, 1e-5), 4 * 12 + 4);
        int fetches = 0;
        for (const auto& [key, program] : t->plan().ranks[0].programs()) {
          for (const Op* op : program.global_block().ops()) {
            // After an update, or (stage 3) before a forward or backward
            // reads the bucket.
            const bool by_reduce =
                op->type() == "allreduce" && op->GetAttr<int32_t>("fetch_parts") > 0;
            fetches += by_reduce || op->type() == "allgather";
            if (std::string(fetch) == "all_reduce") {
              EXPECT_FALSE(op->type() == "allgather");
            }
            if (std::string(fetch) == "all_gather") {
              EXPECT_FALSE(by_reduce);
            }
          }
        }
        EXPECT_GT(fetches, 0);
      }
    }
  }
  // auto, explained: on this host's loopback an all-reduce moves twice the
  // bytes an all-gather does, so each bucket is all-gathered. Without a
  // cluster's costs there is nothing to choose by: an error, not a preset.
  const TrainingProgram tp = BuildGptTrainingProgram(Tiny()).value();
  proto::Strategy s = Sharded(kCases[0], 1);
  s.mutable_sharding()->set_fetch_mode("auto");
  std::vector<std::string> remarks;
  PlanOptions o;
  o.remarks = &remarks;
  const Status no_costs = PlanRanks(tp.main, tp.startup, s, {0}, o).status();
  EXPECT_EQ(no_costs.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(no_costs.message().find("choosing the fetch mode (sharding.fetch_mode "
                                    "auto) needs the costs of the cluster planned for"),
            std::string::npos)
      << no_costs;
  o.costs = LocalPresetCosts().value();
  ASSERT_TRUE(PlanRanks(tp.main, tp.startup, s, {0}, o).ok());
  int explained = 0;
  for (const std::string& r : remarks) {
    explained += r.find("fetch by all-gather") != std::string::npos &&
                 r.find(": all-gather") != std::string::npos;
  }
  EXPECT_GE(explained, 2);
}

// AdamW: sharded and unsharded runs of a layout agree bit for bit (the
// update is elementwise, the reduce-scatter sums as the all-reduce does;
// stage 2 with micro-batches averages each micro-batch before summing
// them, so there only to rounding), each rank holds 1/N of the unsharded
// optimizer state (and under stage 2 of the gradients), and a rerun repeats
// itself bit for bit.
TEST(Sharding, MatchesUnshardedAndHoldsAnNthOfTheState) {
  OptimizerConfig adamw;
  for (int stage : {1, 2})
  for (const Case& k : kCases) {
    SCOPED_TRACE(StrCat(Name(k), " stage ", stage));
    const bool bitwise = stage == 1 || k.micro_batches == 1;
    auto plain = Make(adamw, Sharded(k, 0));
    auto sharded = Make(adamw, Sharded(k, stage));
    auto again = Make(adamw, Sharded(k, stage));
    ASSERT_TRUE(plain && sharded && again);
    for (int s = 0; s < 3; ++s) {
      auto a = plain->Step(s);
      auto b = sharded->Step(s);
      auto c = again->Step(s);
      ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status() << b.status() << c.status();
    }
    for (int r : sharded->local_ranks()) {
      for (const auto& [name, var] : sharded->plan().ranks[r].startup().global_block().vars()) {
        if (!var.is_parameter()) continue;
        const Tensor* x = plain->rank_scope(r).FindLocal(name);
        const Tensor* y = sharded->rank_scope(r).FindLocal(name);
        const Tensor* z = again->rank_scope(r).FindLocal(name);
        ASSERT_TRUE(x && y && z) << name;
        ASSERT_EQ(x->bytes(), y->bytes()) << name;
        if (bitwise) {
          EXPECT_EQ(std::memcmp(x->raw_data(), y->raw_data(), x->bytes()), 0)
              << "rank " << r << " " << name << ": sharded differs from unsharded";
        } else {
          const std::vector<float> u = x->ToFloatVector(), v = y->ToFloatVector();
          double worst = 0;
          for (size_t i = 0; i < u.size(); ++i) worst = std::max(worst, double(std::fabs(u[i] - v[i])));
          EXPECT_LT(worst, 1e-5) << "rank " << r << " " << name;
        }
        EXPECT_EQ(std::memcmp(y->raw_data(), z->raw_data(), y->bytes()), 0)
            << "rank " << r << " " << name << ": rerun differs";
      }
      // Each rank's moments: 1/N of the parameters' (plus padding to N
      // and a beta power per bucket instead of per parameter).
      const double ratio = static_cast<double>(StateBytes(*sharded, r)) / StateBytes(*plain, r);
      EXPECT_GT(ratio, 0.97 / k.dp) << "rank " << r;
      EXPECT_LT(ratio, 1.03 / k.dp) << "rank " << r;
      if (stage == 2) {
        // The gradient bytes that persist: the rank's shards (and a tied
        // parameter's bucket, kept whole across the stages that share it).
        int64_t persistent_grads = 0, all_grads = 0;
        std::set<std::string> seen;  // job programs declare shared vars each
        for (const auto& [key, program] : sharded->plan().ranks[r].programs()) {
          for (const auto& [name, var] : program.global_block().vars()) {
            if (name.find("@GRAD") == std::string::npos || var.has_flat() ||
                !var.persistable() || !seen.insert(name).second) {
              continue;
            }
            const Tensor* t = sharded->rank_scope(r).FindLocal(name);
            if (t != nullptr && t->initialized()) persistent_grads += t->bytes();
          }
        }
        for (const auto& [name, var] : plain->plan().ranks[r].startup().global_block().vars()) {
          if (var.is_parameter()) all_grads += NumElements(MetaOf(var).shape) * 4;
        }
        // 1/dp, plus padding and the tied embedding's bucket (128 x 64).
        EXPECT_LT(persistent_grads, 1.05 * all_grads / k.dp + 128 * 64 * 4) << "rank " << r;
        EXPECT_GT(persistent_grads, 0) << "rank " << r;
      }
    }
  }
}

// The parameter bytes a rank's scope holds between steps: whole
// parameters, and the shards of ZeRO-3 buckets.
int64_t ParameterBytes(ParallelTrainer& t, int rank) {
  std::set<std::string> held;
  for (const auto& [name, var] : t.plan().ranks[rank].startup().global_block().vars()) {
    if (var.is_parameter()) held.insert(name);
  }
  for (const auto& [key, program] : t.plan().ranks[rank].programs()) {
    for (const auto& [name, var] : program.global_block().vars()) {
      if (var.is_parameter() && var.persistable() && var.flat().shard_ring() >= 0) {
        held.insert(name);
      }
    }
  }
  int64_t bytes = 0;
  for (const std::string& v : held) {
    const Tensor* tensor = t.rank_scope(rank).FindLocal(v);
    if (tensor != nullptr && tensor->initialized()) bytes += tensor->bytes();
  }
  return bytes;
}

// Stage 3 under AdamW: the parameters (merged from every rank's part) are
// stage 2's bit for bit on every layout, since the gathers hand the
// forward and backward the very values stage 2 keeps whole; a rerun
// repeats itself; each rank holds 1/N of the parameters between steps
// (a tied embedding's bucket aside, which stays whole).
TEST(Sharding, Stage3MatchesStage2AndHoldsAnNthOfTheParameters) {
  OptimizerConfig adamw;
  std::vector<Case> cases(std::begin(kCases), std::end(kCases));
  cases.insert(cases.end(), std::begin(kHybridCases), std::end(kHybridCases));
  for (const Case& k : cases) {
    SCOPED_TRACE(Name(k));
    auto stage2 = Make(adamw, Sharded(k, 2));
    auto stage3 = Make(adamw, Sharded(k, 3));
    auto again = Make(adamw, Sharded(k, 3));
    ASSERT_TRUE(stage2 && stage3 && again);
    for (int s = 0; s < 3; ++s) {
      auto a = stage2->Step(s);
      auto b = stage3->Step(s);
      auto c = again->Step(s);
      ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status() << b.status() << c.status();
      EXPECT_EQ(*a, *b) << "step " << s << ": the loss differs";
    }
    auto x = stage2->State();
    auto y = stage3->State();
    auto z = again->State();
    ASSERT_TRUE(x.ok() && y.ok() && z.ok()) << x.status() << y.status() << z.status();
    for (auto [from, to] : {std::pair{&x->parameters, &y->parameters},
                            std::pair{&x->optimizer, &y->optimizer},
                            std::pair{&y->parameters, &z->parameters}}) {
      ASSERT_EQ(from->size(), to->size());
      for (const auto& [name, t] : *from) {
        auto it = to->find(name);
        ASSERT_NE(it, to->end()) << name;
        ASSERT_EQ(t.bytes(), it->second.bytes()) << name;
        EXPECT_EQ(std::memcmp(t.raw_data(), it->second.raw_data(), t.bytes()), 0) << name;
      }
    }
    for (int r : stage3->local_ranks()) {
      const int64_t whole = ParameterBytes(*stage2, r);
      const int64_t part = ParameterBytes(*stage3, r);
      // 1/dp, plus padding and the tied embedding's bucket (128 x 64).
      EXPECT_LT(part, 1.05 * whole / Sharing(k) + (k.pp > 1 ? 128 * 64 * 4 : 0))
          << "rank " << r;
      EXPECT_GT(part, 0.95 * whole / Sharing(k)) << "rank " << r;
    }
    // A stage-3 run resumed from stage 2's state goes on as stage 2 does.
    auto resumed = Make(adamw, Sharded(k, 3));
    ASSERT_NE(resumed, nullptr);
    ASSERT_TRUE(resumed->SetState(*x, "stage 2").ok());
    ASSERT_TRUE(stage2->Step(3).ok());
    ASSERT_TRUE(resumed->Step(3).ok());
    auto want = stage2->State();
    auto got = resumed->State();
    ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
    for (const auto& [name, t] : want->parameters) {
      const Tensor& u = got->parameters.at(name);
      EXPECT_EQ(std::memcmp(t.raw_data(), u.raw_data(), t.bytes()), 0) << name << " resumed";
    }
  }
}

// A checkpoint of a sharded run holds per-parameter state, equal to the
// unsharded run's; it resumes sharded and unsharded runs alike, and a
// sharded run resumed from an unsharded checkpoint continues bit for bit
// as the unsharded run does.
TEST(Sharding, StateIsPerParameterAndResumesEitherWay) {
  OptimizerConfig adamw;
  for (auto [k, stage] : {std::pair{kCases[1], 1}, std::pair{kCases[2], 1},
                          std::pair{kCases[4], 1}, std::pair{kCases[0], 2},
                          std::pair{kCases[0], 3}, std::pair{kCases[5], 3}}) {
    SCOPED_TRACE(StrCat(Name(k), " stage ", stage));
    auto plain = Make(adamw, Sharded(k, 0));
    auto sharded = Make(adamw, Sharded(k, stage));
    ASSERT_TRUE(plain && sharded);
    for (int s = 0; s < 2; ++s) {
      ASSERT_TRUE(plain->Step(s).ok());
      ASSERT_TRUE(sharded->Step(s).ok());
    }
    auto a = plain->State();
    auto b = sharded->State();
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    for (auto [x, y] : {std::pair{&a->parameters, &b->parameters},
                        std::pair{&a->optimizer, &b->optimizer}}) {
      ASSERT_EQ(x->size(), y->size());
      for (const auto& [name, t] : *x) {
        auto it = y->find(name);
        ASSERT_NE(it, y->end()) << name << " missing from the sharded run's state";
        ASSERT_EQ(t.bytes(), it->second.bytes()) << name;
        EXPECT_EQ(std::memcmp(t.raw_data(), it->second.raw_data(), t.bytes()), 0) << name;
      }
    }
    // Resume a fresh sharded run from the unsharded state, and an
    // unsharded one from the sharded state: both continue as the run
    // that was never stopped.
    auto resumed_sharded = Make(adamw, Sharded(k, stage));
    auto resumed_plain = Make(adamw, Sharded(k, 0));
    ASSERT_TRUE(resumed_sharded && resumed_plain);
    ASSERT_TRUE(resumed_sharded->SetState(*a, "plain").ok());
    ASSERT_TRUE(resumed_plain->SetState(*b, "sharded").ok());
    for (int s = 2; s < 4; ++s) {
      ASSERT_TRUE(plain->Step(s).ok());
      ASSERT_TRUE(resumed_sharded->Step(s).ok());
      ASSERT_TRUE(resumed_plain->Step(s).ok());
    }
    auto want = plain->State();
    auto got1 = resumed_sharded->State();
    auto got2 = resumed_plain->State();
    ASSERT_TRUE(want.ok() && got1.ok() && got2.ok());
    for (const auto* got : {&*got1, &*got2}) {
      for (const auto& [name, t] : want->parameters) {
        const Tensor& u = got->parameters.at(name);
        EXPECT_EQ(std::memcmp(t.raw_data(), u.raw_data(), t.bytes()), 0) << name;
      }
    }
  }
}

// The plan: every dp all-reduce became a reduce-scatter and an all-gather
// on the buffers themselves, with no op that concatenates, slices or
// copies a bucket.
TEST(Sharding, PlansMoveBucketsWithoutCopies) {
  const TrainingProgram tp = BuildGptTrainingProgram(Tiny()).value();
  for (int stage : {2, 3})
  for (const Case& k : kCases) {
    SCOPED_TRACE(StrCat(Name(k), " stage ", stage));
    auto plan = PlanRanks(tp.main, tp.startup, Sharded(k, stage), {0}, LocalPlanOptions());
    ASSERT_TRUE(plan.ok()) << plan.status();
    int scatters = 0, gathers = 0, splits = 0, regathers = 0;
    for (const auto& [key, program] : plan->ranks[0].programs()) {
      for (const Op* op : program.global_block().ops()) {
        if (op->type() == "reduce_scatter") ++scatters;
        // A stage-2 bucket's gradients are written in place: the join
        // copies nothing; a stage-3 bucket's parameters are views of the
        // gathered whole.
        if (op->type() == "flat_concat") {
          EXPECT_TRUE(OpJoinOf(*op).has_value()) << op->Location();
        }
        if (op->type() == "flat_split") {
          EXPECT_TRUE(OpViewOf(*op).has_value()) << op->Location();
          ++splits;
        }
        if (op->type() == "allgather") ++gathers;
        // Stage 3's gathers before use, in forward and backward jobs.
        if (op->type() == "allgather" && !op->HasRole(role::kOptimize)) ++regathers;
        if (op->type() == "allreduce") {
          EXPECT_NE(op->GetAttr<int32_t>("ring_id"), kDpRing) << op->Location();
        }
        for (const char* copy : {"concat", "split", "slice", "assign"}) {
          if (op->type() != copy) continue;
          for (const std::string& v : op->InputVars()) {
            EXPECT_EQ(v.find("dp.bucket"), std::string::npos) << op->Location();
          }
        }
      }
    }
    EXPECT_GE(scatters, 2);
    if (stage == 2) {
      EXPECT_EQ(scatters, gathers);
      EXPECT_EQ(regathers, 0);
    } else {
      // Every bucket but the tied one gathered in the forward and again
      // in the backward, each handed out by one view; per chunk, the one
      // the forward reads last and the backward first is gathered once.
      EXPECT_EQ(regathers, 2 * (scatters - (k.pp > 1 ? 1 : 0)) - k.vpp);
    }
    EXPECT_EQ(splits, regathers);
  }
}

}  // namespace
}  // namespace loom
