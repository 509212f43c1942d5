// How the planned backward is cut in two: the tensor-parallel input
// gradient's all-reduce issued between its GEMM and the weight gradient's
// (Megatron's asynchronous all-reduce), and the zero-bubble schedules' B
// and W halves.
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "framework/op_registry.h"
#include "models/gpt.h"
#include "passes/planner.h"
#include "unittests/layout_sweep.h"
#include "unittests/test_plan_options.h"

namespace loom {
namespace {

// Where one column-parallel matmul's backward sits in a backward program:
// positions of its input-gradient GEMM (dX), that gradient's all-reduce and
// its weight-gradient GEMM (dW), and the all-reduce's stream.
struct ColumnParallelBackward {
  std::string matmul;  // the forward matmul's output, to name it in failures
  int dx = -1, reduce = -1, dw = -1;
  std::string reduce_type, reduce_stream;
  bool dx_also_writes_dw = false;
};

// The column-parallel matmuls of `forward` (those reading an `@MP_IN`
// identity view: Megatron's f) and where `backward` computes their
// gradients. Found from the forward program, so that a backward that lost
// its split or its all-reduce is still looked at.
std::vector<ColumnParallelBackward> ColumnParallelBackwards(const Program& forward,
                                                            const Program& backward) {
  const Block& fwd = forward.global_block();
  const Block& bwd = backward.global_block();
  std::vector<ColumnParallelBackward> out;
  for (Op* matmul : fwd.ops()) {
    const std::string& x = matmul->Input("X");
    const std::string view = "@MP_IN";
    if (matmul->type() != "matmul" || x.size() < view.size() ||
        x.compare(x.size() - view.size(), view.size(), view) != 0) {
      continue;
    }
    ColumnParallelBackward c;
    c.matmul = matmul->Output("Out");
    for (Op* grad : bwd.ops()) {
      if (grad->type() != "matmul_grad" || grad->desc().forward_id() != matmul->id()) continue;
      if (grad->HasOutput("X@GRAD")) {
        c.dx = bwd.OpIndex(grad);
        c.dx_also_writes_dw = grad->HasOutput("Y@GRAD");
        const std::vector<Op*>& readers = bwd.Consumers(grad->Output("X@GRAD"));
        if (!readers.empty()) {
          c.reduce = bwd.OpIndex(readers.front());
          c.reduce_type = readers.front()->type();
          c.reduce_stream = readers.front()->desc().stream();
        }
      }
      if (grad->HasOutput("Y@GRAD")) c.dw = bwd.OpIndex(grad);
    }
    out.push_back(c);
  }
  return out;
}

// passes.mp_async_allreduce_in_backward, on by default (Megatron's
// asynchronous tensor-parallel all-reduce): in every tensor-parallel
// rank's backward program, each column-parallel matmul's gradient is split
// so that the input gradient's all-reduce is issued, on the mp stream,
// between the input gradient's GEMM and the weight gradient's. That order
// is what lets the all-reduce run under the dW GEMM (the simulated share:
// ParallelTraining.BackwardAllReduceRunsUnderTheWeightGradient).
TEST(Planner, AsyncAllReduceInBackwardSplitsTheWeightGradient) {
  TrainingProgram tp = TinyProgram(2);
  const proto::Strategy s = MakeStrategy(1, 2, 1, 1, "1F1B");
  ASSERT_TRUE(s.passes().mp_async_allreduce_in_backward());  // the default is what is tested
  auto plan = PlanRanks(tp.main, tp.startup, s, {0, 1}, VerifiedPlanOptions());
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->ranks.size(), 2u);
  for (const RankPlan& rank : plan->ranks) {
    SCOPED_TRACE(StrCat("rank ", rank.rank));
    const Program* forward = rank.ProgramFor({JobType::kForward, 0, 0});
    const Program* backward = rank.ProgramFor({JobType::kBackward, 0, 0});
    ASSERT_NE(forward, nullptr);
    ASSERT_NE(backward, nullptr);
    const std::vector<ColumnParallelBackward> columns =
        ColumnParallelBackwards(*forward, *backward);
    // QKV and the MLP's up projection in each of 2 layers, and the
    // (vocabulary-parallel) output projection: a count that keeps the
    // checks below from passing on nothing.
    EXPECT_EQ(columns.size(), 5u);
    for (const ColumnParallelBackward& c : columns) {
      SCOPED_TRACE(c.matmul);
      // The split: dX and dW are two ops (one matmul_grad writing both
      // leaves the all-reduce nothing to run beside).
      EXPECT_FALSE(c.dx_also_writes_dw) << "op " << c.dx << " computes both dX and dW";
      ASSERT_GE(c.dx, 0);
      ASSERT_GE(c.dw, 0);
      // dX's reader is its all-reduce over the mp ring, on the mp stream,
      // so that calc goes on to dW while it runs.
      EXPECT_EQ(c.reduce_type, "allreduce");
      EXPECT_EQ(c.reduce_stream, stream::kMp);
      // Issue order: dX, then its all-reduce, then dW, as the switch
      // promises (strategy.proto). Stream threads and the simulator go by
      // deps, but 1F1B-overlap cuts the backward after each mp all-reduce,
      // so this order puts dW after the cut, in the part that hides it.
      EXPECT_LT(c.dx, c.reduce);
      EXPECT_LT(c.reduce, c.dw) << "the dW GEMM is issued before the dX all-reduce";
    }
  }
}

// Off, one matmul_grad computes both gradients and the all-reduce follows
// it: the synchronous backward that the switch exists to leave.
TEST(Planner, SynchronousAllReduceInBackwardKeepsOneMatmulGrad) {
  TrainingProgram tp = TinyProgram(2);
  proto::Strategy s = MakeStrategy(1, 2, 1, 1, "1F1B");
  s.mutable_passes()->set_mp_async_allreduce_in_backward(false);
  auto plan = PlanRanks(tp.main, tp.startup, s, {0}, VerifiedPlanOptions());
  ASSERT_TRUE(plan.ok()) << plan.status();
  const RankPlan& rank = plan->ranks[0];
  const std::vector<ColumnParallelBackward> columns = ColumnParallelBackwards(
      *rank.ProgramFor({JobType::kForward, 0, 0}), *rank.ProgramFor({JobType::kBackward, 0, 0}));
  EXPECT_EQ(columns.size(), 5u);
  for (const ColumnParallelBackward& c : columns) {
    SCOPED_TRACE(c.matmul);
    EXPECT_TRUE(c.dx_also_writes_dw);
    EXPECT_EQ(c.dx, c.dw);
    EXPECT_EQ(c.reduce_type, "allreduce");
    EXPECT_LT(c.dx, c.reduce);
  }
}

// Under AMP a weight GEMM reads the weight's low-precision copy, whose
// gradient it makes. Split-backward must count that gradient as a
// weight's: else B runs every GEMM, W only casts, and a held-back W keeps
// the whole weight gradient. Each stage's W runs the gradient GEMM of
// every weight GEMM (all forward matmuls but the attention's two a
// layer), at every AMP level, and B makes no gradient of a GEMM weight or
// its copy. W runs nothing else: the biases' and layer norms' gradients
// are reductions that B makes, so that W does not keep their inputs (the
// GEMM's output gradient a second time, a layer norm's input and output
// gradient) for every micro-batch waiting for it.
TEST(Planner, ZeroBubbleWRunsTheWeightGemmsUnderEveryAmpLevel) {
  TrainingProgram tp = TinyProgram(2);
  for (const char* level : {"O0", "O1", "O2"}) {
    for (bool copies : {true, false}) {
      SCOPED_TRACE(StrCat(level, copies ? " with" : " without", " low-precision copies"));
      proto::Strategy s = MakeStrategy(1, 1, 2, 4, "ZBH1");
      s.mutable_amp()->set_level(level);
      s.mutable_passes()->set_low_precision_weights(copies);
      auto plan = PlanRanks(tp.main, tp.startup, s, {}, VerifiedPlanOptions());
      ASSERT_TRUE(plan.ok()) << plan.status();
      for (const RankPlan& rank : plan->ranks) {
        SCOPED_TRACE(StrCat("stage ", rank.coords.pp));
        const Program* forward = rank.ProgramFor({JobType::kForward, 0, 0});
        const Program* b = rank.ProgramFor({JobType::kBackwardB, 0, 0});
        const Program* w = rank.ProgramFor({JobType::kBackwardW, 0, 0});
        ASSERT_NE(forward, nullptr);
        ASSERT_NE(b, nullptr);
        ASSERT_NE(w, nullptr);
        auto count = [](const Program& p, const std::string& type) {
          int n = 0;
          for (const Op* op : p.global_block().ops()) n += op->type() == type;
          return n;
        };
        const int weight_gemms = count(*forward, "matmul") - 2;  // one layer a stage
        EXPECT_GE(weight_gemms, 4);
        EXPECT_EQ(count(*w, "matmul_grad"), weight_gemms);
        // The parameter a var is or copies: "w", "w@BF16", "w.cast_bf16".
        auto parameter_of = [&](std::string var) -> std::string {
          var = var.substr(0, var.find('@'));
          var = var.substr(0, var.find(".cast_"));
          const proto::VarDesc* desc = tp.main.global_block().FindVar(var);
          return desc != nullptr && desc->is_parameter() ? var : "";
        };
        std::set<std::string> gemm_weights;
        for (const Op* op : forward->global_block().ops()) {
          if (op->type() != "matmul") continue;
          const std::string weight = parameter_of(op->Input("Y"));
          if (!weight.empty()) gemm_weights.insert(weight);
        }
        EXPECT_GE(gemm_weights.size(), 4u);
        int b_weight_grads = 0;
        for (const Op* op : b->global_block().ops()) {
          for (const std::string& out : op->OutputVars()) {
            if (!IsGradVarName(out)) continue;
            const std::string weight = parameter_of(StripGradSuffix(out));
            EXPECT_EQ(gemm_weights.count(weight), 0u) << "B's " << op->type() << " makes " << out;
            b_weight_grads += !weight.empty();
          }
        }
        EXPECT_GT(b_weight_grads, 0) << "B makes no bias or layer norm gradient";
        for (const Op* op : w->global_block().ops()) {
          EXPECT_NE(op->type(), "layer_norm_grad");
          EXPECT_NE(op->type(), "elementwise_add_grad");
        }
        // Each half reads one operand's data and the other's meta alone,
        // so that W keeps no weight alive, nor B an input it does not use.
        const OpSchema* gemm = OpRegistry::Global().Find("matmul_grad");
        for (const auto& [half, program] : {std::pair{"B", b}, std::pair{"W", w}}) {
          for (const Op* op : program->global_block().ops()) {
            if (op->type() != "matmul_grad") continue;
            EXPECT_EQ(ReadsInputData(gemm, *op, "X"), op->HasOutput("Y@GRAD"))
                << half << "'s " << op->Location();
            EXPECT_EQ(ReadsInputData(gemm, *op, "Y"), op->HasOutput("X@GRAD"))
                << half << "'s " << op->Location();
          }
        }
        int meta_only = 0;
        for (const Op* op : w->global_block().ops()) {
          meta_only += op->type() == "matmul_grad" && !ReadsInputData(gemm, *op, "Y");
        }
        EXPECT_EQ(meta_only, weight_gemms);
      }
    }
  }
}

}  // namespace
}  // namespace loom
