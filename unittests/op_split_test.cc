// The op-split pass: which matmuls it splits and why, what it emits, how
// the overlap schedule cuts around it, and that training with it is
// training without it, bit for bit.
#include <cctype>
#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>

#include "cost_model/cluster.h"
#include "cost_model/comm_model.h"
#include "cost_model/cost_context.h"
#include "framework/op_view.h"
#include "framework/op_work.h"
#include "framework/shape_inference.h"
#include "models/gpt.h"
#include "passes/planner.h"
#include "runtime/parallel_trainer.h"
#include "runtime/simulation.h"
#include "scheduler/plan_verifier.h"
#include "unittests/test_plan_options.h"

namespace loom {
namespace {

TrainingProgram Gpt(const std::string& preset, int layers) {
  GptConfig c = GptPreset(preset).value();
  c.num_layers = layers;
  return BuildGptTrainingProgram(c).value();
}

proto::Strategy WithSequenceParallel(proto::Strategy s) {
  s.mutable_mp()->set_sequence_parallel(true);
  return s;
}

proto::Strategy Split(proto::Strategy s, int parts) {
  s.mutable_passes()->set_op_split(true);
  s.mutable_passes()->set_op_split_parts(parts);
  return s;
}

int Count(const Program& p, const std::string& type) {
  int n = 0;
  for (const Op* op : p.global_block().ops()) n += op->type() == type;
  return n;
}

std::vector<std::string> SplitRemarks(const std::vector<std::string>& remarks) {
  std::vector<std::string> out;
  for (const std::string& r : remarks) {
    if (r.find("op-split: ") != std::string::npos) out.push_back(r);
  }
  return out;
}

// With parts=2 each of the two row-parallel matmuls of every layer (the
// attention projection and the MLP's down projection) and the
// vocabulary-parallel embedding becomes a split, 2 parts beside 2
// all-reduces, and a concat; the program verifies and the plan's forward
// program carries them.
TEST(OpSplit, SplitsEachRowParallelMatmulIntoParts) {
  TrainingProgram tp = Gpt("gpt-tiny", 2);
  PlanOptions o = LocalPlanOptions();
  o.pass_manager.verify_each = true;
  auto whole = PlanRanks(tp.main, tp.startup, MakeStrategy(1, 2, 1, 2, "1F1B"), {}, o);
  auto split = PlanRanks(tp.main, tp.startup, Split(MakeStrategy(1, 2, 1, 2, "1F1B"), 2), {}, o);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_TRUE(split.ok()) << split.status();
  const Program& f0 = *whole->ranks[0].ProgramFor({JobType::kForward, 0, 0});
  const Program& f1 = *split->ranks[0].ProgramFor({JobType::kForward, 0, 0});
  // 2 layers x 2 row-parallel matmuls and the embedding, each one more
  // part and all-reduce.
  EXPECT_EQ(Count(f1, "matmul"), Count(f0, "matmul") + 4);
  EXPECT_EQ(Count(f1, "lookup_table"), Count(f0, "lookup_table") + 1);
  EXPECT_EQ(Count(f1, "allreduce"), Count(f0, "allreduce") + 5);
  EXPECT_EQ(Count(f1, "concat"), Count(f0, "concat") + 5);
  EXPECT_NE(split->resolved.pipeline().find(",op-split{"), std::string::npos)
      << split->resolved.pipeline();
  // The backward is not touched.
  EXPECT_EQ(Count(*split->ranks[0].ProgramFor({JobType::kBackward, 0, 0}), "matmul_grad"),
            Count(*whole->ranks[0].ProgramFor({JobType::kBackward, 0, 0}), "matmul_grad"));
  Status verified = VerifyPlan(*split);
  EXPECT_TRUE(verified.ok()) << verified;
}

// The cost model decides. On the local preset a gpt-tiny all-reduce is
// all latency: parts would each pay it, so nothing is split, and the
// remark says so. On h100, GPT-3 6.7B's GEMMs and all-reduces are long
// enough to pipeline: the embedding and both matmuls of the layer are
// split.
TEST(OpSplit, CostModelChoosesWhetherAndHowMuch) {
  auto remarks_for = [](const std::string& preset, const std::string& cluster_name) {
    TrainingProgram tp = Gpt(preset, 1);
    proto::Cluster cluster = LoadCluster(cluster_name).value();
    CostContext costs(cluster, CostTable());
    std::vector<std::string> remarks;
    PlanOptions o;
    o.costs = &costs;
    o.remarks = &remarks;
    auto plan = PlanRank(tp.main, tp.startup, Split(MakeStrategy(1, 2, 1, 2, "1F1B"), 0), 0, o);
    EXPECT_TRUE(plan.ok()) << plan.status();
    return SplitRemarks(remarks);
  };
  const auto local = remarks_for("gpt-tiny", "local");
  ASSERT_EQ(local.size(), 4u);
  EXPECT_NE(local[0].find("not split: no part count saves time once its copies are paid"), std::string::npos)
      << local[0];
  EXPECT_NE(local[3].find("split 0 of 3 ops"), std::string::npos) << local[3];

  const auto h100 = remarks_for("gpt3-6.7b", "h100");
  ASSERT_EQ(h100.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NE(h100[i].find("; split into "), std::string::npos) << h100[i];
  }
  EXPECT_NE(h100[3].find("split 3 of 3 ops"), std::string::npos) << h100[3];
}

// 1F1B-overlap cuts a forward after each tensor-parallel all-reduce; inside
// a split op the next part hides the all-reduce, so the cut stays after
// the last part: as many parts as without op-split.
TEST(OpSplit, OverlapScheduleCutsAfterTheLastPart) {
  TrainingProgram tp = Gpt("gpt-tiny", 2);
  auto parts = [&](const proto::Strategy& s) {
    auto plan = PlanRanks(tp.main, tp.startup, s, {0}, LocalPlanOptions());
    EXPECT_TRUE(plan.ok()) << plan.status();
    int n = 0;
    for (const Job& j : plan->ranks[0].jobs) {
      n += j.type == JobType::kForward && j.micro_batch == 1;
    }
    return n;
  };
  const proto::Strategy overlap = MakeStrategy(1, 2, 1, 4, "1F1B-overlap");
  EXPECT_GT(parts(overlap), 1);
  EXPECT_EQ(parts(Split(overlap, 4)), parts(overlap));
}

TEST(OpSplit, BadSwitchesNameTheField) {
  auto error = [](const proto::Strategy& s) { return ValidateStrategy(s).message(); };
  EXPECT_EQ(error(Split(MakeStrategy(2, 1, 1, 2, "1F1B"), 0)),
            "passes.op_split hides tensor-parallel all-reduces under GEMMs, but mp.degree is 1 "
            "(there are none)");
  EXPECT_EQ(error(Split(MakeStrategy(1, 2, 1, 2, "1F1B"), 1)),
            "passes.op_split_parts must be 0 (the cost model chooses) or at least 2, got 1");
  proto::Strategy off = MakeStrategy(1, 2, 1, 2, "1F1B");
  off.mutable_passes()->set_op_split_parts(4);
  EXPECT_EQ(error(off), "passes.op_split_parts is 4 but passes.op_split is off");
}

// OpenBLAS's kernel family, chosen for this CPU at load time.
extern "C" char* openblas_get_corename(void);

// Whether this BLAS computes a GEMM row the same whatever the row count.
// OpenBLAS's SkylakeX SGEMM kernels do; with its Cooperlake kernels (which
// this AMD EPYC host gets), and its Haswell and Zen ones, a row-split GEMM
// can differ from the whole one in the last bit (measured with
// OPENBLAS_CORETYPE: only SkylakeX trains bit-identically here).
bool RowsIndependentOfRowCount() {
  std::string core = openblas_get_corename();
  for (char& c : core) c = static_cast<char>(std::tolower(c));
  return core == "skylakex";
}

// Rows are independent in the GEMM, in the all-reduce's sum and in the
// sequence-parallel reduce-scatter's and all-gather's, so a split
// plan computes every element as the unsplit one does: after 3 steps every
// parameter and optimizer moment of every rank is bit-identical, and so are
// the losses, on the overlap schedule with a pipeline and without, where
// the BLAS computes a row whatever the row count; elsewhere, under SGD,
// within the 2e-5 the serial parity tests allow.
TEST(OpSplit, TrainsBitIdenticallyToUnsplit) {
  const bool exact = RowsIndependentOfRowCount();
  std::printf("OpenBLAS core %s: %s\n", openblas_get_corename(),
              exact ? "bit-identical expected" : "within 2e-5 expected");
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 4;
  c.batch_size = 16;
  struct Case {
    proto::Strategy strategy;
    int parts;
  };
  for (const Case& k : {Case{MakeStrategy(1, 2, 2, 4, "1F1B-overlap"), 2},
                        Case{MakeStrategy(1, 2, 1, 4, "1F1B-overlap"), 4},
                        Case{MakeStrategy(2, 2, 1, 2, "1F1B"), 3},
                        Case{WithSequenceParallel(MakeStrategy(1, 2, 2, 4, "1F1B")), 2}}) {
    SCOPED_TRACE(StrCat(k.strategy.pipeline().schedule_mode(), " dp=", k.strategy.dp().degree(),
                        " pp=", k.strategy.pipeline().degree(), " parts=", k.parts,
                        k.strategy.mp().sequence_parallel() ? " sequence-parallel" : ""));
    ParallelTrainer::Options options;
    options.comm.timeout = std::chrono::seconds(30);
    // Not bit-identical, AdamW would turn last-bit differences in a
    // near-zero gradient into whole steps of the learning rate (its update
    // is about the gradient's sign); SGD keeps a difference its size.
    OptimizerConfig opt;
    if (!exact) {
      opt.type = "sgd";
      opt.learning_rate = 0.5f;
    }
    auto whole = ParallelTrainer::Create(c, opt, k.strategy, options);
    auto split = ParallelTrainer::Create(c, opt, Split(k.strategy, k.parts), options);
    ASSERT_TRUE(whole.ok()) << whole.status();
    ASSERT_TRUE(split.ok()) << split.status();
    for (int s = 0; s < 3; ++s) {
      auto a = (*whole)->Step(s);
      auto b = (*split)->Step(s);
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_TRUE(b.ok()) << b.status();
      if (exact) {
        EXPECT_EQ(*a, *b) << "step " << s;
      } else {
        EXPECT_NEAR(*a, *b, 1e-5) << "step " << s;
      }
    }
    const int world = k.strategy.dp().degree() * k.strategy.mp().degree() *
                      k.strategy.pipeline().degree();
    int compared = 0;
    for (int r = 0; r < world; ++r) {
      for (const std::string& name : (*whole)->rank_scope(r).LocalNames()) {
        const Tensor* a = (*whole)->rank_scope(r).FindLocal(name);
        const Tensor* b = (*split)->rank_scope(r).FindLocal(name);
        if (b == nullptr || !a->initialized() || a->dtype() != proto::FP32) continue;
        ASSERT_TRUE(b->initialized()) << "rank " << r << " var " << name;
        const std::vector<float> x = a->ToFloatVector(), y = b->ToFloatVector();
        if (exact) {
          ASSERT_EQ(x, y) << "rank " << r << " var " << name;
        } else {
          ASSERT_EQ(x.size(), y.size());
          for (size_t i = 0; i < x.size(); ++i) {
            ASSERT_NEAR(x[i], y[i], 2e-5)
                << "rank " << r << " var " << name << " [" << i << "]";
          }
        }
        ++compared;
      }
    }
    EXPECT_GT(compared, 50 * world);
  }
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

// A split along its leading dim makes consecutive blocks of X: its parts
// view X (no copy, no work) from where they start. A split across rows
// (the attention's q/k/v on the last dim) gathers strided data and copies.
// The concat after the parts is a join: nothing to copy either.
TEST(OpSplit, LeadingDimSplitsAreViewsAndTheirConcatsJoins) {
  TrainingProgram tp = Gpt("gpt-tiny", 1);
  auto plan = PlanRanks(tp.main, tp.startup, Split(MakeStrategy(1, 2, 1, 2, "1F1B"), 2), {0},
                        LocalPlanOptions());
  ASSERT_TRUE(plan.ok()) << plan.status();
  int views = 0, copies = 0;
  for (const Op* op : plan->ranks[0].ProgramFor({JobType::kForward, 0, 0})->global_block().ops()) {
    if (op->type() != "split") continue;
    const std::optional<OpView> view = OpViewOf(*op);
    const OpWork work = WorkOf(*op);
    if (op->desc().creation_pass() == "op-split") {
      ASSERT_TRUE(view.has_value()) << op->Location();
      const proto::VarDesc& x = *op->block()->FindVar(op->Input("X"));
      const int64_t half = NumElements(MetaOf(x).shape) / 2;
      EXPECT_EQ(view->input, op->Input("X"));
      EXPECT_EQ(view->offsets, (std::vector<int64_t>{0, half}));
      EXPECT_EQ(work.bytes, 0);
      ++views;
    } else {
      EXPECT_FALSE(view.has_value()) << op->Location();
      EXPECT_GT(work.bytes, 0);
      ++copies;
    }
  }
  EXPECT_EQ(views, 3);  // the embedding's and the layer's two
  EXPECT_EQ(copies, 1);
  // Each part's all-reduce writes its rows of the concat's output: the
  // concat is a join and does nothing.
  int joins = 0;
  for (const Op* op : plan->ranks[0].ProgramFor({JobType::kForward, 0, 0})->global_block().ops()) {
    if (op->type() != "concat") continue;
    const std::optional<OpJoin> join = OpJoinOf(*op);
    ASSERT_TRUE(join.has_value()) << op->Location();
    EXPECT_EQ(join->output, op->Output("Out"));
    EXPECT_EQ(WorkOf(*op).bytes, 0);
    for (size_t i = 0; i < join->parts.size(); ++i) {
      const std::optional<PlacedPart> at = PlacedPartOf(*op->block(), join->parts[i]);
      ASSERT_TRUE(at.has_value());
      EXPECT_EQ(at->whole, join->output);
      EXPECT_EQ(at->offset, join->offsets[i]);
    }
    ++joins;
  }
  EXPECT_EQ(joins, 3);
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

// Under sequence parallelism a column-parallel matmul waits for the
// all-gather of its sequence-split input. Split, each part is gathered and
// then multiplied, gather i+1 beside GEMM i: per layer QKV and the MLP's
// up projection, and the head, each one more gather and GEMM; the
// row-parallel side's reduce-scatters split as before.
TEST(OpSplit, SequenceParallelGathersEachPartBeforeItsGemm) {
  TrainingProgram tp = Gpt("gpt-tiny", 2);
  PlanOptions o = LocalPlanOptions();
  o.pass_manager.verify_each = true;
  std::vector<std::string> remarks;
  o.remarks = &remarks;
  const proto::Strategy sp = WithSequenceParallel(MakeStrategy(1, 2, 1, 2, "1F1B"));
  auto whole = PlanRanks(tp.main, tp.startup, sp, {}, LocalPlanOptions());
  auto split = PlanRanks(tp.main, tp.startup, Split(sp, 2), {}, o);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_TRUE(split.ok()) << split.status();
  const Program& f0 = *whole->ranks[0].ProgramFor({JobType::kForward, 0, 0});
  const Program& f1 = *split->ranks[0].ProgramFor({JobType::kForward, 0, 0});
  EXPECT_EQ(Count(f1, "allgather"), Count(f0, "allgather") + 2 * 2 + 1);
  EXPECT_EQ(Count(f1, "reduce_scatter"), Count(f0, "reduce_scatter") + 2 * 2);
  EXPECT_EQ(Count(f1, "matmul"), Count(f0, "matmul") + 2 * 4 + 1);
  // In order: split, then each part's gather and GEMM, then the join.
  const std::vector<Op*> ops = f1.global_block().OpVector();
  int gathered_splits = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i]->type() != "split" || ops[i]->desc().creation_pass() != "op-split") continue;
    if (ops[i + 1]->type() != "allgather") continue;
    ASSERT_LT(i + 5, ops.size());
    std::vector<std::string> types;
    for (size_t j = i + 1; j <= i + 5; ++j) types.push_back(ops[j]->type());
    EXPECT_EQ(types, (std::vector<std::string>{"allgather", "matmul", "allgather", "matmul",
                                               "concat"}))
        << ops[i]->Location();
    // Part 1's GEMM reads part 1's gather, not part 0's.
    EXPECT_EQ(ops[i + 4]->Input("X"), ops[i + 3]->Output("Out")) << ops[i]->Location();
    // The batch dim: the sequence is the gathered one.
    EXPECT_EQ(ops[i]->GetAttr<int32_t>("axis"), 0) << ops[i]->Location();
    ++gathered_splits;
  }
  EXPECT_EQ(gathered_splits, 2 * 2 + 1);
  int gather_remarks = 0;
  for (const std::string& r : SplitRemarks(remarks)) {
    gather_remarks += r.find(": all-gather ") != std::string::npos &&
                      r.find("; split into 2 parts on dim 0 (parts option)") != std::string::npos &&
                      r.find(" beside all-gather ") != std::string::npos;
  }
  EXPECT_EQ(gather_remarks, 2 * (2 * 2 + 1)) << "one per gather on each of the 2 ranks";
  Status verified = VerifyPlan(*split);
  EXPECT_TRUE(verified.ok()) << verified;
}

// How much of the forward's all-gather time calc hides on the `a100`
// preset: one GPT-3 6.7B layer over 8 ranks with sequence parallelism,
// fp32. Unsplit, each column-parallel GEMM waits for its whole gather, and
// nothing else is left to run; in 4 parts, the GEMMs (about 6 ms of fp32
// QKV against a 0.5 ms gather) hide every gather but the first part's.
double ForwardGatherShareUnderCalc(const proto::Strategy& strategy) {
  GptConfig c = GptPreset("gpt3-6.7b").value();
  c.num_layers = 1;
  c.batch_size = 4;
  const proto::Cluster cluster = LoadCluster("a100").value();
  const CostContext costs(cluster, CostTable());
  SimulationOptions options;
  options.trace = true;
  auto sim = SimulateGpt(c, {}, strategy, CostModelTimers(costs), options, PlanOptionsAt(costs));
  EXPECT_TRUE(sim.ok()) << sim.status();
  if (!sim.ok()) return -1;
  const std::vector<TraceEvent>& trace = sim->result.trace;
  int64_t gather_ns = 0, hidden_ns = 0;
  for (const TraceEvent& mp : trace) {
    if (mp.rank != 0 || mp.stream != "mp" || mp.op != "allgather" ||
        mp.job.type != JobType::kForward) {
      continue;
    }
    gather_ns += mp.end_ns - mp.start_ns;
    for (const TraceEvent& calc : trace) {
      if (calc.rank != 0 || calc.stream != "calc") continue;
      hidden_ns += std::max<int64_t>(
          0, std::min(mp.end_ns, calc.end_ns) - std::max(mp.start_ns, calc.start_ns));
    }
  }
  EXPECT_GT(gather_ns, 0);
  return gather_ns > 0 ? static_cast<double>(hidden_ns) / gather_ns : -1;
}

TEST(OpSplit, SequenceParallelGathersRunUnderTheGemms) {
  const proto::Strategy sp = WithSequenceParallel(MakeStrategy(1, 8, 1, 1, "1F1B"));
  const double whole = ForwardGatherShareUnderCalc(sp);
  const double split = ForwardGatherShareUnderCalc(Split(sp, 4));
  std::printf("forward all-gather time under calc: unsplit %.1f%%, 4 parts %.1f%%\n",
              100 * whole, 100 * split);
  EXPECT_LT(whole, 0.05);
  // 3 of 4 parts' gathers run beside a GEMM: 75% at most (75.0% measured).
  EXPECT_GT(split, 0.7);
  EXPECT_LT(split, 0.751);
}

}  // namespace
}  // namespace loom
