// The low-precision weights a plan computes with: the low-precision-weights
// pass (passes/low_precision_weights_pass.cc) casts each parameter AMP casts
// once a step, after its update, into one persistable copy (training is
// bit-identical to casting at each use, a restored run makes the copies
// again, and a pipeline stage holds one copy however many micro-batches
// are in flight); ZeRO stage 3 gathers its weights in bf16
// (passes/sharding_gathers.h), each use or once a step.
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "cost_model/cluster.h"
#include "cost_model/cost_context.h"
#include "framework/op_registry.h"
#include "framework/shape_inference.h"
#include "models/gpt.h"
#include "runtime/parallel_trainer.h"
#include "runtime/simulation.h"
#include "unittests/layout_sweep.h"
#include "unittests/parameter_compare.h"
#include "unittests/test_plan_options.h"

namespace loom {
namespace {

// gpt-small cut to 4 layers, with a vocabulary so small that the layers'
// weights, not the embedding's, dominate a stage's.
GptConfig SmallWithLayerWeightsFirst(int batch) {
  GptConfig c = GptPreset("gpt-small").value();
  c.num_layers = 4;
  c.batch_size = batch;
  c.vocab_size = 1024;
  return c;
}

// Steps `a` and `b` (plans of one model under two layouts) three times
// and expects the same losses, and the same parameters in the state each
// would checkpoint, bit for bit.
void ExpectTrainAlike(ParallelTrainer& a, ParallelTrainer& b) {
  for (int step = 0; step < 3; ++step) {
    auto x = a.Step(step);
    auto y = b.Step(step);
    ASSERT_TRUE(x.ok() && y.ok()) << x.status() << y.status();
    EXPECT_EQ(*x, *y) << "step " << step;
  }
  const TrainingState x = a.State().value(), y = b.State().value();
  for (const auto& [name, tensor] : y.parameters) {
    EXPECT_EQ(tensor.ToFloatVector(), x.parameters.at(name).ToFloatVector()) << name;
  }
}

proto::Strategy WithoutThePass(proto::Strategy s) {
  s.mutable_passes()->set_low_precision_weights(false);
  return s;
}

bool IsParameterCast(const Block& block, const Op& op) {
  if (op.type() != "cast") return false;
  const proto::VarDesc* x = block.FindVar(op.Input("X"));
  return x != nullptr && x->is_parameter();
}

TEST(LowPrecisionWeights, EachParameterIsCastOnceAStepAfterItsUpdate) {
  const GptConfig c = TinyWithDropout(2, 8);
  ParallelTrainer::Options options;
  options.comm.timeout = std::chrono::seconds(30);
  const Layout layout{1, 2, 2, "1F1B", 0, "O2"};
  auto t = ParallelTrainer::Create(c, OptimizerConfig(), layout.ToStrategy(4), options);
  ASSERT_TRUE(t.ok()) << t.status();
  for (const RankPlan& rank : (*t)->plan().ranks) {
    SCOPED_TRACE(StrCat("rank ", rank.rank));
    const Block& startup = rank.startup().global_block();
    std::map<std::string, int> copies;  // copy -> casts that refresh it
    for (const auto& [name, var] : startup.vars()) {
      if (!var.has_cast_of()) continue;
      EXPECT_TRUE(var.persistable()) << name;
      EXPECT_EQ(var.dtype(), proto::BF16) << name;
      copies[name] = 0;
    }
    EXPECT_GT(copies.size(), 4u);
    for (const auto& [key, program] : rank.programs()) {
      const Block& block = program.global_block();
      for (const Op* op : block.ops()) {
        if (!IsParameterCast(block, *op)) continue;
        EXPECT_EQ(key.type, JobType::kOptimizer) << op->Location() << " casts a parameter";
        const std::string param = op->Input("X");
        ASSERT_EQ(copies.count(op->Output("Out")), 1u) << op->Location();
        ++copies[op->Output("Out")];
        // After the update of the parameter it casts.
        bool updated = false;
        for (const Op* writer : block.Producers(param)) {
          updated |= writer->index() < op->index();
          EXPECT_LT(writer->index(), op->index()) << writer->Location() << " writes " << param;
        }
        EXPECT_TRUE(updated) << op->Location();
      }
    }
    for (const auto& [copy, casts] : copies) EXPECT_EQ(casts, 1) << copy;
  }
}

// With and without the pass, on layouts where the update and the weights'
// fetch differ: plain, tensor and pipeline parallel with recomputation,
// ZeRO 1 and 2 (the fetch into the flat buffer, by all-gather or all-reduce
// on the sharding stream) and ZeRO 3 (gathered parameters keep their
// casts).
TEST(LowPrecisionWeights, TrainsBitIdenticallyToCastingAtEachUse) {
  const GptConfig c = TinyWithDropout(2, 8);
  OptimizerConfig adamw;
  adamw.learning_rate = 1e-2f;
  adamw.clip_grad_norm = 1.0f;
  ParallelTrainer::Options options;
  options.comm.timeout = std::chrono::seconds(30);
  struct Case {
    Layout layout;
    const char* fetch_mode = "all_gather";
    bool recompute = false;
  };
  for (const Case& k : {Case{{2, 1, 1, "1F1B", 0, "O2"}}, Case{{1, 2, 2, "ZBH1", 0, "O2"}, "", true},
                        Case{{2, 1, 2, "1F1B", 1, "O2"}, "all_gather"},
                        Case{{2, 1, 1, "1F1B", 2, "O1"}, "all_reduce"},
                        Case{{2, 1, 2, "1F1B", 3, "O2"}}}) {
    SCOPED_TRACE(StrCat(k.layout.Name(), " fetch ", k.fetch_mode, k.recompute ? " recompute" : ""));
    proto::Strategy s = k.layout.ToStrategy(2);
    if (*k.fetch_mode) s.mutable_sharding()->set_fetch_mode(k.fetch_mode);
    if (k.recompute) s.mutable_recompute()->set_granularity("full");
    auto with = ParallelTrainer::Create(c, adamw, s, options);
    ASSERT_TRUE(with.ok()) << with.status();
    auto without = ParallelTrainer::Create(c, adamw, WithoutThePass(s), options);
    ASSERT_TRUE(without.ok()) << without.status();
    for (int step = 0; step < 4; ++step) {
      ASSERT_TRUE((*with)->Step(step).ok());
      ASSERT_TRUE((*without)->Step(step).ok());
      EXPECT_EQ((*with)->LastGradNorm(), (*without)->LastGradNorm()) << "step " << step;
    }
    // Every persistable of the plan without copies (the copies are the
    // with-plan's own).
    ExpectSameState(**without, **with);
  }
}

// A checkpoint holds the fp32 parameters, not their copies: a run restored
// from it makes the copies from the restored parameters, and goes on as
// the run it came from. Copies left as the startup made them would compute
// step 2 with the initial weights.
TEST(LowPrecisionWeights, ARestoredRunMakesItsCopiesAgain) {
  const GptConfig c = TinyWithDropout(2, 8);
  OptimizerConfig adamw;
  adamw.learning_rate = 1e-2f;
  adamw.clip_grad_norm = 1.0f;  // so that the step reports its gradient norm
  ParallelTrainer::Options options;
  options.comm.timeout = std::chrono::seconds(30);
  const proto::Strategy s = Layout{1, 2, 2, "1F1B", 0, "O2"}.ToStrategy(2);
  auto first = ParallelTrainer::Create(c, adamw, s, options);
  ASSERT_TRUE(first.ok()) << first.status();
  for (int step = 0; step < 2; ++step) ASSERT_TRUE((*first)->Step(step).ok());
  const TrainingState state = (*first)->State().value();
  for (const auto& [name, tensor] : state.parameters) {
    EXPECT_EQ(name.find("@BF16"), std::string::npos) << "the checkpoint holds copy " << name;
  }
  auto restored = ParallelTrainer::Create(c, adamw, s, options);
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_TRUE((*restored)->SetState(state, "the first run").ok());
  ExpectSameState(**first, **restored);
  ASSERT_TRUE((*first)->Step(2).ok());
  ASSERT_TRUE((*restored)->Step(2).ok());
  EXPECT_EQ((*first)->LastGradNorm(), (*restored)->LastGradNorm());
  ExpectSameState(**first, **restored);
}

// A pipeline stage keeps its micro-batches' activations until their
// backward; its weights it keeps once, however many are in flight.
TEST(LowPrecisionWeights, AStageHoldsOneCopyWhateverItsMicroBatchesInFlight) {
  const GptConfig c = SmallWithLayerWeightsFirst(8);
  const proto::Cluster cluster = LoadCluster("a100").value();
  const CostContext costs(cluster, CostTable());
  const TimerFactory timer = CostModelTimers(costs);
  const Layout layout{1, 1, 2, "1F1B", 0, "O2"};
  auto memory = [&](int micro_batches, bool pass) {
    proto::Strategy s = layout.ToStrategy(micro_batches);
    if (!pass) s = WithoutThePass(s);
    auto sim = SimulateGpt(c, OptimizerConfig(), s, timer, {}, PlanOptionsAt(costs));
    EXPECT_TRUE(sim.ok()) << sim.status();
    const RankMetrics& r = sim->result.ranks[0];
    return std::pair{r.persistent,
                     r.peak_temporaries_by_kind[static_cast<int>(MemoryKind::kParameterCopy)]};
  };
  const auto [two, two_temp] = memory(2, true);
  const auto [eight, eight_temp] = memory(8, true);
  EXPECT_EQ(two_temp, 0);
  EXPECT_EQ(eight_temp, 0);
  EXPECT_EQ(two.parameters, eight.parameters);
  // bf16 copies of (almost) every fp32 master weight: the layer norms'
  // affine parameters stay fp32.
  EXPECT_GT(two.parameters, 0.45 * two.master_weights);
  EXPECT_LE(two.parameters, 0.5 * two.master_weights);
  // Without the pass, stage 0 holds its layers' copies once per
  // micro-batch in flight, two at 1F1B with two stages, each kept for the
  // matmuls' gradients (the embedding's copy dies with its lookup).
  const auto [per_use, per_use_temp] = memory(8, false);
  EXPECT_EQ(per_use.parameters, 0);
  EXPECT_GT(per_use_temp, 1.25 * eight.parameters);
  std::printf("stage 0's bf16 weights: %.1f MB once; %.1f MB at the peak when cast per use\n",
              eight.parameters / 1e6, per_use_temp / 1e6);
}

// ZeRO stage 3 under O2. A bucket that every reader casts to bf16 (the
// weight matrices) is gathered in bf16: each gather casts the rank's shard
// first, half the bytes of gathering fp32 and casting after. A bucket with
// a parameter read in fp32 (a layer norm's) is gathered in fp32, and the
// backward casts what it gathers again rather than keep each micro-batch's
// forward casts until its backward. Either way no weight copy is kept per
// micro-batch in flight, and under ZBH1 the W half (whose matmul_grad
// reads its weight's meta alone) keeps none alive either. The numbers are
// those of stage 2, bit for bit: casting commutes with gathering.
TEST(LowPrecisionWeights, Stage3GathersInBf16AndKeepsNoCastForTheBackward) {
  const GptConfig c = TinyWithDropout(2, 8);
  OptimizerConfig adamw;
  adamw.learning_rate = 1e-2f;
  // SGD has one kind of update, so its buckets mix the layer norms' fp32
  // parameters with the matrices; AdamW decays matrices and not vectors,
  // which buckets keep apart.
  OptimizerConfig sgd = adamw;
  sgd.type = "sgd";
  ParallelTrainer::Options options;
  options.comm.timeout = std::chrono::seconds(30);
  struct Case {
    const char* schedule;
    const OptimizerConfig* optimizer;
    // ZBV with sequence parallelism: split-backward puts the tied output
    // layer's weight GEMM in W, where no gather may wait on it.
    bool zbv_sp = false;
  };
  for (const Case& k : {Case{"1F1B", &adamw}, Case{"ZBH1", &adamw}, Case{"1F1B", &sgd},
                        Case{"ZBV", &adamw, true}}) {
    SCOPED_TRACE(StrCat(k.schedule, " ", k.optimizer->type));
    const GptConfig config = k.zbv_sp ? TinyWithDropout(4, 8) : c;
    auto strategy = [&](int stage) {
      proto::Strategy s = Layout{2, k.zbv_sp ? 2 : 1, 2, k.schedule, stage, "O2"}.ToStrategy(4);
      if (k.zbv_sp) {
        s.mutable_pipeline()->set_vpp_degree(2);
        s.mutable_mp()->set_sequence_parallel(true);
      }
      return s;
    };
    auto t = ParallelTrainer::Create(config, *k.optimizer, strategy(3), options);
    ASSERT_TRUE(t.ok()) << t.status();
    int recasts = 0;
    std::map<DataType, int64_t> gathered;  // bytes a step's gathers make whole, by dtype
    for (const RankPlan& rank : (*t)->plan().ranks) {
      std::set<std::string> forward_casts;
      for (const auto& [key, program] : rank.programs()) {
        const Block& block = program.global_block();
        for (const Op* op : block.ops()) {
          if (key.type == JobType::kForward && IsParameterCast(block, *op) &&
              op->desc().stream() != stream::kSharding) {
            forward_casts.insert(op->Output("Out"));
          }
          if (op->type() == "allgather" && op->desc().stream() == stream::kSharding &&
              key.type != JobType::kOptimizer) {
            const proto::VarDesc& out = *block.FindVar(op->Output("Out"));
            gathered[out.dtype()] += NumElements(MetaOf(out).shape) * SizeOf(out.dtype());
          }
        }
      }
      for (const auto& [key, program] : rank.programs()) {
        if (key.type == JobType::kForward) continue;
        for (const Op* op : program.global_block().ops()) {
          const OpSchema* schema = OpRegistry::Global().Find(op->type());
          for (const auto& slot : op->desc().inputs()) {
            if (!ReadsInputData(schema, *op, slot.name())) continue;  // the meta alone
            for (const std::string& in : slot.vars()) {
              EXPECT_EQ(forward_casts.count(in), 0u) << op->Location() << " reads the forward's "
                                                     << in;
            }
          }
          recasts += op->type() == "cast" && op->Output("Out").find("@RECAST") != std::string::npos;
        }
      }
    }
    const int64_t all = gathered[proto::BF16] + gathered[proto::FP32];
    if (k.optimizer == &adamw) {
      // Only the vectors' buckets, a layer norm in each, are gathered in fp32.
      EXPECT_GT(gathered[proto::BF16], 0.9 * all);
      EXPECT_EQ(recasts, 0);
    } else {
      EXPECT_GT(gathered[proto::FP32], 0);
      EXPECT_GT(recasts, 0);
    }
    auto stage2 = ParallelTrainer::Create(config, *k.optimizer, strategy(2), options);
    ASSERT_TRUE(stage2.ok()) << stage2.status();
    ExpectTrainAlike(**t, **stage2);
  }

  // Simulated: at stage 0's peak, the copies live are a fraction of the
  // stage's weights in bf16 (stage 2's one persistent copy of them); kept
  // from forward to backward they were one set per micro-batch in flight.
  const GptConfig big = SmallWithLayerWeightsFirst(16);
  const proto::Cluster cluster = LoadCluster("a100").value();
  const CostContext costs(cluster, CostTable());
  for (const char* schedule : {"1F1B", "ZBH1"}) {
    SCOPED_TRACE(schedule);
    auto simulate = [&](int stage) {
      auto sim = SimulateGpt(big, OptimizerConfig(),
                             Layout{2, 1, 2, schedule, stage, "O2"}.ToStrategy(8),
                             CostModelTimers(costs), {}, PlanOptionsAt(costs));
      EXPECT_TRUE(sim.ok()) << sim.status();
      return sim.ok() ? sim->result.ranks[0] : RankMetrics();
    };
    const RankMetrics two = simulate(2), three = simulate(3);
    const int64_t copies =
        three.peak_temporaries_by_kind[static_cast<int>(MemoryKind::kParameterCopy)];
    ASSERT_GT(two.persistent.parameters, 0);
    EXPECT_LT(copies, 0.5 * two.persistent.parameters);
    std::printf("%s: stage 0's bf16 weights %.1f MB; stage 3 holds %.1f MB of copies at its peak\n",
                schedule, two.persistent.parameters / 1e6, copies / 1e6);
  }
}

// ZeRO stage 3 under O2 with every bucket kept whole for the step
// (sharding.keep_gathered_bytes -1): a bucket of weight matrices is
// gathered once a step, in bf16, in the first micro-batch's forward (its
// gather does nothing in the others), into a persistable buffer that the
// weights' readers view and wait on by an event; the backward gathers
// nothing. The rank then holds the weights whole in bf16 alone, where the
// kept fp32 bucket held them in fp32 as well. The numbers are stage 2's,
// bit for bit.
TEST(LowPrecisionWeights, Stage3KeepsItsWeightsInBf16ForTheStep) {
  const GptConfig c = TinyWithDropout(2, 8);
  OptimizerConfig adamw;
  adamw.learning_rate = 1e-2f;
  ParallelTrainer::Options options;
  options.comm.timeout = std::chrono::seconds(30);
  auto layout = [](const char* schedule, int stage) {
    proto::Strategy s = Layout{2, 1, 2, schedule, stage, "O2"}.ToStrategy(4);
    if (stage == 3) s.mutable_sharding()->set_keep_gathered_bytes(-1);
    return s;
  };
  for (const char* schedule : {"1F1B", "ZBH1"}) {
    SCOPED_TRACE(schedule);
    auto t = ParallelTrainer::Create(c, adamw, layout(schedule, 3), options);
    ASSERT_TRUE(t.ok()) << t.status();
    int once = 0;
    for (const RankPlan& rank : (*t)->plan().ranks) {
      for (const auto& [key, program] : rank.programs()) {
        const Block& block = program.global_block();
        std::set<std::string> waited;
        for (const Op* op : block.ops()) waited.insert(op->desc().wait_events().begin(),
                                                       op->desc().wait_events().end());
        for (const Op* op : block.ops()) {
          if (op->type() != "allgather" || op->desc().stream() != stream::kSharding) continue;
          const proto::VarDesc& out = *block.FindVar(op->Output("Out"));
          if (out.dtype() != proto::BF16) continue;
          EXPECT_EQ(key.type, JobType::kForward) << op->Location();
          EXPECT_TRUE(op->desc().first_micro_batch_only()) << op->Location();
          EXPECT_TRUE(out.persistable()) << op->Location();
          ASSERT_EQ(op->desc().record_events_size(), 1) << op->Location();
          EXPECT_EQ(waited.count(op->desc().record_events(0)), 1u) << op->Location();
          ++once;
        }
      }
    }
    EXPECT_GT(once, 0);
    auto stage2 = ParallelTrainer::Create(c, adamw, layout(schedule, 2), options);
    ASSERT_TRUE(stage2.ok()) << stage2.status();
    ExpectTrainAlike(**t, **stage2);
    const TrainingState x = (*t)->State().value();
    // The bf16 buffer is derived state: a checkpoint leaves it out, and a
    // restored run gathers it again in its first micro-batch.
    for (const auto* held : {&x.parameters, &x.optimizer}) {
      for (const auto& [name, tensor] : *held) {
        EXPECT_EQ(name.find("bf16"), std::string::npos) << "the checkpoint holds " << name;
      }
    }
    auto restored = ParallelTrainer::Create(c, adamw, layout(schedule, 3), options);
    ASSERT_TRUE(restored.ok()) << restored.status();
    ASSERT_TRUE((*restored)->SetState(x, "the first run").ok());
    auto a = (*t)->Step(3);
    auto b = (*restored)->Step(3);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    EXPECT_EQ(*a, *b);
    ExpectSameState(**t, **restored);
  }

  // Simulated: the bf16 weights stage 2 holds whole, stage 3 holds whole
  // too, but the fp32 weights it holds are the rank's shards (the layer
  // norms' and the tied embedding's buckets, read in fp32, stay whole).
  const GptConfig big = SmallWithLayerWeightsFirst(16);
  const proto::Cluster cluster = LoadCluster("a100").value();
  const CostContext costs(cluster, CostTable());
  auto simulate = [&](int stage) {
    auto sim = SimulateGpt(big, OptimizerConfig(), layout("1F1B", stage), CostModelTimers(costs),
                           {}, PlanOptionsAt(costs));
    EXPECT_TRUE(sim.ok()) << sim.status();
    return sim.ok() ? sim->result.ranks[0] : RankMetrics();
  };
  const RankMetrics two = simulate(2), three = simulate(3);
  EXPECT_NEAR(three.persistent.parameters, two.persistent.parameters,
              0.05 * two.persistent.parameters);
  EXPECT_LT(three.persistent.master_weights, 0.7 * two.persistent.master_weights);
  std::printf("stage 0: bf16 weights %.1f / %.1f MB, fp32 weights %.1f / %.1f MB at stage 2 / 3\n",
              two.persistent.parameters / 1e6, three.persistent.parameters / 1e6,
              two.persistent.master_weights / 1e6, three.persistent.master_weights / 1e6);

  // The gathers hide under the first micro-batch's forward, and the later
  // micro-batches wait for nothing: on gpt3-1.3b cut to 4 layers (h100,
  // dp8, 4 micro-batches), where each micro-batch's reduce-scatters keep
  // the sharding stream busy, keeping steps faster than stage 2, which
  // gathers fp32 after the update. (While the later micro-batches' readers
  // waited on the gathers' no-op places in that stream, it was slower.)
  GptConfig wide = GptPreset("gpt3-1.3b").value();
  wide.num_layers = 4;
  wide.batch_size = 32;
  wide.seq_len = 512;
  const CostContext h100(LoadCluster("h100").value(), CostTable());
  auto step = [&](int stage) {
    proto::Strategy s = MakeStrategy(8, 1, 1, 4, "1F1B");
    s.mutable_amp()->set_level("O2");
    s.mutable_sharding()->set_stage(stage);
    if (stage == 3) s.mutable_sharding()->set_keep_gathered_bytes(-1);
    auto sim = SimulateGpt(wide, OptimizerConfig(), s, CostModelTimers(h100), {},
                           PlanOptionsAt(h100));
    EXPECT_TRUE(sim.ok()) << sim.status();
    return sim.ok() ? sim->result.step_time_s : 0.0;
  };
  const double stage2 = step(2), kept = step(3);
  EXPECT_LT(kept, stage2);
  std::printf("gpt3-1.3b, 4 layers, dp8: %.2f ms kept at stage 3, %.2f ms at stage 2\n",
              kept * 1e3, stage2 * 1e3);
}

}  // namespace
}  // namespace loom
