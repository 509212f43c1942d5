// Lowering's rules, one hand-built program each: cross-stream data flow
// (read after write, write after read, write after write), FIFO within a
// stream, ring order, skipped ops, and how temporaries are counted for
// freeing. The executor and the simulator both follow these dependencies,
// so a rule dropped here is a race there.
#include <algorithm>
#include <memory>

#include <gtest/gtest.h>

#include "framework/op_builder.h"
#include "framework/op_registry.h"
#include "framework/shape_inference.h"
#include "scheduler/execution_graph.h"

namespace loom {
namespace {

// An op on `stream` (empty: calc) reading `in` into `out`: a scale on calc,
// an mp all-reduce elsewhere.
proto::OpDesc On(const std::string& stream, const std::string& in, const std::string& out,
                 bool last_micro_batch_only = false) {
  proto::OpDesc d = stream.empty()
                        ? OpDescBuilder("scale").Input("X", in).Output("Out", out).Build()
                        : OpDescBuilder("allreduce")
                              .Input("X", in)
                              .Output("Out", out)
                              .Attr("ring_id", static_cast<int32_t>(kMpRing))
                              .Role(role::kForward | role::kComm)
                              .Build();
  d.set_stream(stream);
  d.set_last_micro_batch_only(last_micro_batch_only);
  return d;
}

class Lowered {
 public:
  // `ops` form the forward program of rank 0 (mp=2), run as one forward
  // job per micro-batch; `persistable` vars live in the step scope.
  Lowered(const std::vector<proto::OpDesc>& ops, const std::vector<std::string>& persistable,
          int micro_batches = 1) {
    RegisterAllOps();
    auto set = std::make_shared<ProgramSet>();
    Program& p = set->programs[{JobType::kForward, 0}];
    Block& b = p.global_block();
    for (const char* name : {"x", "p"}) {
      proto::VarDesc* v = b.AddVar(name);
      v->add_shape(4);
      v->set_is_data(std::string(name) == "x");
    }
    for (const proto::OpDesc& op : ops) CHECK(AppendOpInferShapes(b, op).ok()) << op.type();
    for (const std::string& name : persistable) b.FindVar(name)->set_persistable(true);
    RankPlan rp;
    rp.coords = {0, 0, 0};
    for (int mb = 0; mb < micro_batches; ++mb) rp.jobs.push_back({JobType::kForward, mb});
    rp.program_set = std::move(set);
    auto graph = LowerRank(rp, ParallelLayout{1, 2, 1});
    CHECK(graph.ok()) << graph.status();
    graph_ = std::move(graph).value();
  }

  const Instruction& At(int micro_batch, int op) const {
    for (const Instruction& i : graph_.instructions()) {
      if (i.micro_batch == micro_batch && i.op_index == op) return i;
    }
    LOG(FATAL) << "no instruction for op " << op;
  }
  bool Waits(int op, int on, int micro_batch = 0) const {
    const std::vector<int>& deps = At(micro_batch, op).deps;
    return std::find(deps.begin(), deps.end(), At(micro_batch, on).id) != deps.end();
  }
  const RankGraph& graph() const { return graph_; }

 private:
  RankGraph graph_;
};

TEST(Lowering, ReadAfterWriteAcrossStreams) {
  // calc: x -> a; mp: a -> b; calc: b -> c.
  const Lowered l({On("", "x", "a"), On("mp", "a", "b"), On("", "b", "c")}, {});
  EXPECT_TRUE(l.Waits(1, 0));
  EXPECT_TRUE(l.Waits(2, 1));
}

TEST(Lowering, WriteAfterReadAndWriteAfterWriteAcrossStreams) {
  // calc reads the persistable p; then mp overwrites it; then calc again.
  const Lowered l({On("", "p", "a"), On("mp", "x", "p"), On("", "a", "p")}, {"p"});
  EXPECT_TRUE(l.Waits(1, 0)) << "the write must wait for the read before it";
  EXPECT_TRUE(l.Waits(2, 1)) << "the second write must wait for the first";
}

TEST(Lowering, SameStreamOrderIsFifoNotADependency) {
  const Lowered l({On("", "x", "a"), On("", "a", "b")}, {});
  EXPECT_TRUE(l.At(0, 1).deps.empty());
}

TEST(Lowering, CollectivesOfARingKeepPlanOrderAcrossStreams) {
  // Two mp all-reduces with no data between them, the second on another
  // stream: every member must issue them in the same order.
  proto::OpDesc second = On("mp", "x", "b");
  second.set_stream(stream::kDp);
  const Lowered l({On("mp", "x", "a"), second}, {});
  EXPECT_TRUE(l.Waits(1, 0));
  EXPECT_EQ(l.At(0, 0).comm_seq, 0);
  EXPECT_EQ(l.At(0, 1).comm_seq, 1);
}

TEST(Lowering, LastMicroBatchOnlyOpsAreSkippedElsewhere) {
  const Lowered l({On("", "x", "a"), On("mp", "a", "b", /*last_micro_batch_only=*/true)}, {},
                  /*micro_batches=*/2);
  EXPECT_EQ(l.At(0, 1).kind, InstructionKind::kNoOp);
  EXPECT_EQ(l.At(1, 1).kind, InstructionKind::kCollective);
  // A skipped op keeps its place: it still waits for its input.
  EXPECT_TRUE(l.Waits(1, 0, /*micro_batch=*/0));
}

TEST(Lowering, TemporariesCountEveryToucherAndViewsShareOne) {
  // a is written by op 0 and read by ops 1 and 2: three touchers, freed
  // after the last. The identity view of b shares b's buffer.
  proto::OpDesc view = OpDescBuilder("identity")
                           .Input("X", "b")
                           .Output("Out", "v")
                           .Attr("ring_id", static_cast<int32_t>(kMpRing))
                           .Build();
  const Lowered l({On("", "x", "a"), On("", "a", "b"), On("", "a", "c"), view, On("", "v", "d")},
                  {});
  const RankGraphBody& body = *l.graph().body;
  auto temporary = [&](const std::string& var) -> const Temporary* {
    for (const Temporary& t : body.temporaries) {
      if (body.var_names[t.var] == var) return &t;
    }
    return nullptr;
  };
  ASSERT_NE(temporary("a"), nullptr);
  EXPECT_EQ(temporary("a")->touched_by, 3);
  EXPECT_EQ(temporary("a")->bytes, 16);
  ASSERT_NE(temporary("b"), nullptr);
  EXPECT_EQ(temporary("v"), nullptr) << "a view has no buffer of its own";
  ASSERT_EQ(temporary("b")->views.size(), 1u);
  EXPECT_EQ(body.var_names[temporary("b")->views[0]], "v");
  EXPECT_EQ(temporary("b")->touched_by, 3);  // written, viewed, read through the view
  EXPECT_TRUE(temporary("x")->fed);
}

// ZeRO's gradient buckets: calc writes each, and a reduce-scatter on the
// sharding stream reads it. A bucket's first write waits for the call two
// calls back and, within a job, holds that call's bucket until it starts,
// so the bucket goes at the same point of calc's order whenever its call
// ends; across jobs it does not hold it (micro-batch 1's first bucket).
TEST(Lowering, ABucketsFirstWriteHoldsTheBucketTwoCallsBackWithinItsJob) {
  auto reduce = [](const std::string& bucket, const std::string& shard) {
    proto::OpDesc d = OpDescBuilder("reduce_scatter")
                          .Input("X", bucket)
                          .Output("Out", shard)
                          .Attr("ring_id", static_cast<int32_t>(kMpRing))
                          .Attr("nranks", 2)
                          .Attr("reduce_op", std::string("avg"))
                          .Role(role::kBackward | role::kComm)
                          .Build();
    d.set_stream(stream::kSharding);
    return d;
  };
  const Lowered l({On("", "x", "g0"), reduce("g0", "s0"), On("", "x", "g1"), reduce("g1", "s1"),
                   On("", "x", "g2"), reduce("g2", "s2")},
                  {"s0", "s1", "s2"}, /*micro_batches=*/2);
  const RankGraphBody& body = *l.graph().body;
  auto temporary = [&](int micro_batch, const std::string& var) {
    for (size_t t = 0; t < body.temporaries.size(); ++t) {
      const Temporary& temp = body.temporaries[t];
      if (temp.micro_batch == micro_batch && body.var_names[temp.var] == var) {
        return static_cast<int>(t);
      }
    }
    return -1;
  };
  auto releases = [&](const Instruction& ins) {
    return std::vector<int>(body.touches.begin() + ins.uses_end(),
                            body.touches.begin() + ins.touches_begin + ins.touches_count);
  };
  EXPECT_FALSE(l.Waits(2, 1)) << "the second bucket fills while the first is reduced";
  EXPECT_TRUE(l.Waits(4, 1)) << "the third waits for the first's call";
  EXPECT_EQ(releases(l.At(0, 4)), std::vector<int>{temporary(0, "g0")});
  EXPECT_EQ(body.temporaries[temporary(0, "g0")].touched_by, 3);  // written, reduced, held
  for (int op : {0, 1, 2, 3, 5}) EXPECT_EQ(l.At(0, op).releases, 0) << "op " << op;
  // Micro-batch 1's first bucket waits for micro-batch 0's second call,
  // in another job: no hold, that bucket goes when its call ends.
  EXPECT_TRUE(std::find(l.At(1, 0).deps.begin(), l.At(1, 0).deps.end(), l.At(0, 3).id) !=
              l.At(1, 0).deps.end());
  EXPECT_EQ(l.At(1, 0).releases, 0);
  EXPECT_EQ(body.temporaries[temporary(0, "g1")].touched_by, 2);
  EXPECT_EQ(releases(l.At(1, 4)), std::vector<int>{temporary(1, "g0")});
}

}  // namespace
}  // namespace loom
