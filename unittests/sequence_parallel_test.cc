// Sequence parallelism (passes/sequence_parallel_pass.cc): what the pass
// rewrites, that training with it follows tensor parallelism without it on
// every kind of layout and reruns bit for bit, and that recomputation on
// top of it changes no bit.
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "framework/op_builder.h"
#include "framework/shape_inference.h"
#include "models/gpt.h"
#include "passes/planner.h"
#include "passes/strategy.h"
#include "runtime/gpt_plan.h"
#include "runtime/parallel_trainer.h"
#include "unittests/layout_sweep.h"
#include "unittests/parameter_compare.h"
#include "unittests/test_plan_options.h"

namespace loom {
namespace {

proto::Strategy WithSequenceParallel(proto::Strategy s) {
  s.mutable_mp()->set_sequence_parallel(true);
  return s;
}

// The ops of every job program of rank 0, by type, and the shapes of vars.
struct Rank0 {
  std::map<std::string, int> forward, backward, optimize;
  std::map<std::string, Shape> shapes;
};
Rank0 Rank0Of(const Plan& plan) {
  Rank0 out;
  for (const auto& [key, program] : plan.ranks[0].programs()) {
    const Block& block = program.global_block();
    for (const Op* op : block.ops()) {
      if (op->HasRole(role::kForward)) ++out.forward[op->type()];
      if (op->HasRole(role::kBackward)) ++out.backward[op->type()];
      if (op->HasRole(role::kOptimize)) ++out.optimize[op->type()];
    }
    for (const auto& [name, var] : block.vars()) out.shapes[name] = MetaOf(var).shape;
  }
  return out;
}

TEST(SequenceParallel, SplitsTheResidualStreamAndSwapsTheCollectives) {
  const GptConfig c = TinyWithDropout(2, 4);  // s = 32, h = 64
  const proto::Strategy tp = MakeStrategy(1, 2, 1, 1, "1F1B");
  auto plain = PlanGpt(c, OptimizerConfig(), tp, {}, LocalPlanOptions());
  auto sp = PlanGpt(c, OptimizerConfig(), WithSequenceParallel(tp), {}, LocalPlanOptions());
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(sp.ok()) << sp.status();
  const Rank0 a = Rank0Of(*plain), b = Rank0Of(*sp);
  // Per layer, two row-parallel all-reduces become reduce-scatters; the
  // embedding's stays. Two column inputs per layer and the head's are
  // all-gathered forward, and again backward.
  EXPECT_EQ(a.forward.at("allreduce"), 2 * 2 + 1);
  EXPECT_EQ(b.forward.at("allreduce"), 1);
  EXPECT_EQ(b.forward.at("reduce_scatter"), 2 * 2);
  EXPECT_EQ(b.forward.at("allgather"), 2 * 2 + 1);
  EXPECT_EQ(b.forward.count("identity"), 0u);
  // Backward: the column inputs' gradients are reduce-scattered, the
  // row outputs' gradients and the embedding slice's gathered.
  EXPECT_EQ(b.backward.at("reduce_scatter"), 2 * 2 + 1);
  EXPECT_EQ(b.backward.at("allgather"), (2 * 2 + 1) + 2 * 2 + 1);
  EXPECT_EQ(a.backward.at("allreduce"), 2 * 2 + 1);
  EXPECT_EQ(b.backward.count("allreduce"), 0u);
  // Replicated parameters the region reads, summed over mp once a step
  // before their update: two layer norms and two row-parallel biases per
  // layer, and the final layer norm.
  EXPECT_EQ(a.optimize.count("allreduce"), 0u);
  EXPECT_EQ(b.optimize.at("allreduce"), 2 * (2 * 2 + 2) + 2);
  // The residual stream and what layer norms keep hold half the sequence.
  EXPECT_EQ(a.shapes.at("layers.1.attn_residual"), (Shape{4, 32, 64}));
  EXPECT_EQ(b.shapes.at("layers.1.attn_residual"), (Shape{4, 16, 64}));
  EXPECT_EQ(b.shapes.at("layers.1.ln2.mean"), (Shape{4, 16}));
  // The attention itself still sees the whole sequence, split by head.
  EXPECT_EQ(b.shapes.at("layers.1.attn.probs"), a.shapes.at("layers.1.attn.probs"));
}

TEST(SequenceParallel, BadStrategiesNameTheField) {
  const GptConfig c = TinyWithDropout(2, 4);
  auto no_mp = PlanGpt(c, OptimizerConfig(), WithSequenceParallel(MakeStrategy(2, 1, 1, 1, "1F1B")),
                       {}, LocalPlanOptions());
  ASSERT_FALSE(no_mp.ok());
  EXPECT_NE(no_mp.status().message().find("mp.sequence_parallel"), std::string::npos)
      << no_mp.status();
  GptConfig odd = c;
  odd.seq_len = 33;  // not divisible by mp 2
  auto uneven =
      PlanGpt(odd, OptimizerConfig(), WithSequenceParallel(MakeStrategy(1, 2, 1, 1, "1F1B")), {},
              LocalPlanOptions());
  ASSERT_FALSE(uneven.ok());
  EXPECT_NE(uneven.status().message().find("does not divide the sequence dim"), std::string::npos)
      << uneven.status();
}

// A split value read by an op that needs every position: the error names
// the op and the value, rather than planning wrong numbers.
TEST(SequenceParallel, AnOpThatNeedsTheWholeSequenceIsNamed) {
  auto tp = BuildGptTrainingProgram(TinyWithDropout(2, 4));
  ASSERT_TRUE(tp.ok()) << tp.status();
  Block& block = tp->main.global_block();
  Op* probe = block.InsertOpBefore(block.FirstProducer("layers.0.mlp_residual"),
                                   OpDescBuilder("reduce_mean")
                                       .Input("X", "layers.0.attn_residual")
                                       .Output("Out", "probe")
                                       .Attr("reduce_all", true)
                                       .Role(role::kForward)
                                       .Build());
  *block.AddVar("probe") = *block.FindVar(kLossVar);
  block.FindVar("probe")->set_name("probe");
  ASSERT_NE(probe, nullptr);
  auto plan =
      PlanRank(tp->main, tp->startup, WithSequenceParallel(MakeStrategy(1, 2, 1, 1, "1F1B")), 0,
               LocalPlanOptions());
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("(reduce_mean) reads layers.0.attn_residual, which "
                                         "sequence parallelism splits along dim 1"),
            std::string::npos)
      << plan.status();
}

// 5 steps with clipping and dropout on every kind of layout.
//  - Against tensor parallelism without the split, under SGD, whose update
//    carries a gradient's error as it is: within 1e-6 relative (layer-norm
//    and bias gradients are summed over each rank's half of the positions,
//    then over the ranks, so they round differently). AdamW would not do:
//    it turns the key bias's gradient, zero but for rounding (softmax
//    ignores a constant added to every key), into full-size updates.
//  - Against itself rerun (on mp2), and with full or selective recomputation
//    on top, under AdamW: bit for bit. (ZBH1 and 1F1B-overlap split the
//    backward that plain 1F1B keeps whole; recompute_test covers that.)
TEST(SequenceParallel, FollowsTensorParallelismOnEveryLayout) {
  const GptConfig c = TinyWithDropout(2, 8);
  OptimizerConfig sgd;
  sgd.type = "sgd";
  sgd.learning_rate = 0.1f;
  sgd.clip_grad_norm = 1.0f;
  OptimizerConfig adamw;
  adamw.learning_rate = 1e-2f;
  adamw.clip_grad_norm = 1.0f;
  ParallelTrainer::Options options;
  options.comm.timeout = std::chrono::seconds(30);
  auto train = [&](const OptimizerConfig& o, const proto::Strategy& s, std::vector<float>* norms) {
    auto t = ParallelTrainer::Create(c, o, s, options);
    EXPECT_TRUE(t.ok()) << t.status();
    if (!t.ok()) return std::unique_ptr<ParallelTrainer>();
    for (int step = 0; step < 5; ++step) {
      auto loss = (*t)->Step(step);
      EXPECT_TRUE(loss.ok()) << loss.status();
      if (!loss.ok()) return std::unique_ptr<ParallelTrainer>();
      norms->push_back((*t)->LastGradNorm());
    }
    return std::move(*t);
  };
  for (const Layout& k :
       {Layout{1, 2, 1, "1F1B"}, Layout{1, 2, 1, "1F1B", 0, "O2"}, Layout{1, 2, 2, "ZBH1"},
        Layout{1, 2, 2, "1F1B-overlap", 0, "O0", true}, Layout{2, 2, 2, "1F1B", 3}}) {
    SCOPED_TRACE(k.Name());
    const proto::Strategy tp = k.ToStrategy(2);
    const proto::Strategy sp = WithSequenceParallel(tp);

    std::vector<float> tp_norms, sp_norms;
    auto without = train(sgd, tp, &tp_norms);
    auto with = train(sgd, sp, &sp_norms);
    ASSERT_TRUE(without && with);
    if (k.op_split) {
      // Stage 0's layer: each row-parallel matmul in two batch parts, each
      // reduce-scattered, and each column-parallel one in two, each
      // gathered.
      const Rank0 ops = Rank0Of(with->plan());
      EXPECT_EQ(ops.forward.at("reduce_scatter"), 2 * 2);
      EXPECT_EQ(ops.forward.at("allgather"), 2 * 2);
    }
    // bf16 rounds the activations each split sum makes, and keeps them.
    const double tolerance = std::string(k.amp) == "O0" ? 1e-6 : 1e-3;
    for (int step = 0; step < 5; ++step) {
      EXPECT_NEAR(sp_norms[step], tp_norms[step], tolerance * tp_norms[step]) << "step " << step;
    }
    const double worst = ExpectSameState(*without, *with, tolerance);
    printf("[ sp vs tp ] %s dp%d mp%d pp%d zero%d %s: worst persistable difference %.3g\n",
           k.schedule, k.dp, k.mp, k.pp, k.sharding, k.amp, worst);

    std::vector<float> first_norms;
    auto first = train(adamw, sp, &first_norms);
    ASSERT_TRUE(first);
    if (k.pp == 1 && std::string(k.amp) == "O0") {
      std::vector<float> again_norms;
      auto again = train(adamw, sp, &again_norms);
      ASSERT_TRUE(again);
      EXPECT_EQ(again_norms, first_norms);
      ExpectSameState(*first, *again);
    }
    for (const char* granularity : {"full", "selective"}) {
      SCOPED_TRACE(granularity);
      proto::Strategy r = sp;
      r.mutable_recompute()->set_granularity(granularity);
      std::vector<float> norms;
      auto recomputed = train(adamw, r, &norms);
      ASSERT_TRUE(recomputed);
      EXPECT_EQ(norms, first_norms);
      ExpectSameState(*first, *recomputed);
    }
  }
}

}  // namespace
}  // namespace loom
