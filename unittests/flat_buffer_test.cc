// Flat buffers (VarDesc.flat): a data-parallel bucket's gradients are views
// of one persistent buffer, so that its all-reduce runs in place on one
// tensor; the verifier refuses a malformed placement; memory counts the
// buffer once; and training gives the same numbers as unbucketed gradients.
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "executor/flat_buffers.h"
#include "framework/verifier.h"
#include "passes/planner.h"
#include "runtime/parallel_trainer.h"
#include "scheduler/execution_graph.h"
#include "scheduler/schedule.h"
#include "unittests/test_plan_options.h"

namespace loom {
namespace {

GptConfig Tiny() {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 2;
  c.batch_size = 8;
  return c;
}

// The flat buffers of a rank's job programs: buffer -> members.
std::map<std::string, std::vector<std::string>> BuffersOf(const RankPlan& rp) {
  std::map<std::string, std::set<std::string>> members;
  for (const auto& [key, program] : rp.programs()) {
    for (const auto& [name, var] : program.global_block().vars()) {
      if (var.has_flat()) members[var.flat().buffer()].insert(name);
    }
  }
  std::map<std::string, std::vector<std::string>> out;
  for (auto& [b, m] : members) out[b].assign(m.begin(), m.end());
  return out;
}

proto::Strategy Bucketed(int dp, int pp, int micro_batches, bool bucketing) {
  proto::Strategy s = MakeStrategy(dp, 1, pp, micro_batches, "1F1B");
  s.mutable_dp()->set_bucket_size_bytes(64 * 1024);
  s.mutable_passes()->set_dp_bucketing(bucketing);
  return s;
}

TEST(FlatBuffers, BucketGradientsAreViewsOfOneBufferAndTrainAsBefore) {
  OptimizerConfig sgd;
  sgd.type = "sgd";
  sgd.learning_rate = 0.5f;
  // One step's gradients (temporaries made persistent) and accumulated
  // gradients over micro-batches and stages.
  for (auto [dp, pp, m] : {std::tuple{2, 1, 1}, std::tuple{2, 2, 2}}) {
    SCOPED_TRACE(StrCat("dp=", dp, " pp=", pp, " micro-batches=", m));
    ParallelTrainer::Options options;
    options.comm.timeout = std::chrono::seconds(30);
    auto flat = ParallelTrainer::Create(Tiny(), sgd, Bucketed(dp, pp, m, true), options);
    auto loose = ParallelTrainer::Create(Tiny(), sgd, Bucketed(dp, pp, m, false), options);
    ASSERT_TRUE(flat.ok()) << flat.status();
    ASSERT_TRUE(loose.ok()) << loose.status();
    for (int s = 0; s < 3; ++s) {
      auto a = (*flat)->Step(s);
      auto b = (*loose)->Step(s);
      ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
      if (!std::isnan(*a)) {
        EXPECT_EQ(*a, *b) << "step " << s;
      }
    }
    int buffers = 0, members = 0;
    for (int r : (*flat)->local_ranks()) {
      const RankPlan& rp = (*flat)->plan().ranks[r];
      Scope& scope = (*flat)->rank_scope(r);
      for (const auto& [buffer, names] : BuffersOf(rp)) {
        ++buffers;
        EXPECT_GE(names.size(), 2u) << buffer;
        const Tensor* whole = scope.FindLocal(buffer);
        ASSERT_NE(whole, nullptr) << buffer;
        for (const std::string& name : names) {
          ++members;
          const proto::VarDesc* var = nullptr;
          for (const auto& [key, p] : rp.programs()) {
            if ((var = p.global_block().FindVar(name)) != nullptr) break;
          }
          const Tensor* t = scope.FindLocal(name);
          ASSERT_NE(t, nullptr) << name;
          // The member's bytes are the buffer's, where the plan put them.
          EXPECT_EQ(t->raw_data(), static_cast<const uint8_t*>(whole->raw_data()) +
                                       var->flat().offset() * SizeOf(t->dtype()))
              << "rank " << r << " " << name;
        }
      }
      // Bucketing reduced the same sums in another grouping: every
      // parameter is bit for bit the unbucketed run's.
      for (const auto& [name, var] : rp.startup().global_block().vars()) {
        if (!var.is_parameter()) continue;
        const Tensor* x = scope.FindLocal(name);
        const Tensor* y = (*loose)->rank_scope(r).FindLocal(name);
        ASSERT_TRUE(x != nullptr && y != nullptr) << name;
        ASSERT_EQ(x->bytes(), y->bytes());
        EXPECT_EQ(std::memcmp(x->raw_data(), y->raw_data(), x->bytes()), 0)
            << "rank " << r << " " << name;
      }
    }
    EXPECT_GE(buffers, 2 * dp);
    EXPECT_GT(members, 2 * buffers);
    // Unbucketed, no gradient is placed in a buffer.
    for (int r : (*loose)->local_ranks()) {
      EXPECT_TRUE(BuffersOf((*loose)->plan().ranks[r]).empty());
    }
  }
}

// A buffer's bytes count once among the rank's persistent gradients: as
// many as the accumulators it replaces.
TEST(FlatBuffers, MemoryCountsEachBufferOnce) {
  const TrainingProgram tp = BuildGptTrainingProgram(Tiny()).value();
  auto persistent = [&](bool bucketing) {
    auto plan =
        PlanRanks(tp.main, tp.startup, Bucketed(2, 2, 2, bucketing), {0}, LocalPlanOptions());
    EXPECT_TRUE(plan.ok()) << plan.status();
    auto graph = LowerPlan(*plan);
    EXPECT_TRUE(graph.ok()) << graph.status();
    return graph->ranks[0].body->persistent;
  };
  const PersistentBytes flat = persistent(true), loose = persistent(false);
  EXPECT_GT(flat.gradients, 0);
  EXPECT_EQ(flat.gradients, loose.gradients);
  EXPECT_EQ(flat.parameters, loose.parameters);
  EXPECT_EQ(flat.optimizer_state, loose.optimizer_state);
}

// Placements the verifier refuses, each naming the var and the buffer.
TEST(FlatBuffers, VerifierRefusesBadPlacements) {
  auto program = [](int64_t offset_b, int64_t buffer_len, bool persistable) {
    Program p;
    Block& b = p.global_block();
    for (const char* name : {"a", "b"}) {
      proto::VarDesc* v = b.AddVar(name);
      SetMeta(TensorMeta{proto::FP32, {2, 3}}, v);
      v->set_persistable(persistable);
      v->mutable_flat()->set_buffer("buf");
    }
    b.FindVar("b")->mutable_flat()->set_offset(offset_b);
    proto::VarDesc* buf = b.AddVar("buf");
    SetMeta(TensorMeta{proto::FP32, {buffer_len}}, buf);
    buf->set_persistable(true);
    return p;
  };
  EXPECT_TRUE(VerifyProgram(program(6, 12, true)).ok());
  Status overlap = VerifyProgram(program(4, 12, true));
  EXPECT_NE(overlap.message().find("'a' and 'b' overlap in flat buffer 'buf'"), std::string::npos)
      << overlap;
  Status outside = VerifyProgram(program(8, 12, true));
  EXPECT_NE(outside.message().find("var 'b' in flat buffer 'buf': elements [8, 14) lie outside"),
            std::string::npos)
      << outside;
  Status temporary = VerifyProgram(program(6, 12, false));
  EXPECT_NE(temporary.message().find("must be persistable"), std::string::npos) << temporary;
  Program missing = program(6, 12, true);
  missing.global_block().RemoveVar("buf");
  EXPECT_EQ(VerifyProgram(missing).code(), StatusCode::kNotFound);
}

// Binding copies values a member already holds into its place, once, and
// binding again leaves the views alone.
TEST(FlatBuffers, BindingKeepsHeldValuesAndIsIdempotent) {
  Program p;
  Block& b = p.global_block();
  for (auto [name, offset] : {std::pair{"w", 0}, std::pair{"v", 4}}) {
    proto::VarDesc* v = b.AddVar(name);
    SetMeta(TensorMeta{proto::FP32, {2, 2}}, v);
    v->set_persistable(true);
    v->mutable_flat()->set_buffer("buf");
    v->mutable_flat()->set_offset(offset);
  }
  proto::VarDesc* buf = b.AddVar("buf");
  SetMeta(TensorMeta{proto::FP32, {8}}, buf);
  buf->set_persistable(true);
  Scope scope;
  *scope.Var("w") = MakeTensor({2, 2}, std::vector<float>{1, 2, 3, 4});
  ASSERT_TRUE(BindFlatBuffers(b, &scope).ok());
  EXPECT_EQ(scope.FindLocal("buf")->ToFloatVector(),
            (std::vector<float>{1, 2, 3, 4, 0, 0, 0, 0}));
  scope.FindLocal("v")->data<float>()[1] = 7;
  ASSERT_TRUE(BindFlatBuffers(b, &scope).ok());
  EXPECT_EQ(scope.FindLocal("buf")->ToFloatVector(),
            (std::vector<float>{1, 2, 3, 4, 0, 7, 0, 0}));
  // A held value of another shape is named, not copied over.
  Scope wrong;
  *wrong.Var("w") = MakeTensor({3}, std::vector<float>{1, 2, 3});
  Status s = BindFlatBuffers(b, &wrong);
  EXPECT_NE(s.message().find("var 'w' holds"), std::string::npos) << s;
}

}  // namespace
}  // namespace loom
