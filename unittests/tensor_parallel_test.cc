// The tensor-parallel pass on the GPT program: Megatron's per-rank shapes,
// the f/g communication pairs, and a startup program that gives each rank
// exactly its slice of the serial initialization.
#include <gtest/gtest.h>

#include "executor/serial_executor.h"
#include "framework/shape_inference.h"
#include "models/gpt.h"
#include "passes/pass_manager.h"

namespace loom {
namespace {

struct Rewritten {
  TrainingProgram serial;
  std::unique_ptr<PassContext> ctx;
};

Rewritten RunTp(int degree, int rank) {
  RegisterAllPasses();
  Rewritten r{BuildGptTrainingProgram(GptPreset("gpt-tiny").value()).value(), nullptr};
  r.ctx = std::make_unique<PassContext>(ParallelLayout{1, degree, 1}, rank,
                                        r.serial.main.Clone(), r.serial.startup.Clone());
  PassManager pm;
  CHECK(pm.AddPipeline(StrCat("tensor-parallel{degree=", degree, "}")).ok());
  Status st = pm.Run(*r.ctx);
  CHECK(st.ok()) << st;
  return r;
}

Shape ShapeOf(const Program& p, const std::string& var) {
  return MetaOf(*p.global_block().FindVar(var)).shape;
}

TEST(TensorParallel, MegatronShapesAtMp2) {
  Rewritten r = RunTp(2, 1);
  const Program& p = r.ctx->program();
  const int64_t h = 64, v = 128;
  // Column-parallel: output columns split, with their bias.
  EXPECT_EQ(ShapeOf(p, "layers.0.attn.qkv.weight"), (Shape{h, 3 * h / 2}));
  EXPECT_EQ(ShapeOf(p, "layers.0.attn.qkv.bias"), (Shape{3 * h / 2}));
  EXPECT_EQ(ShapeOf(p, "layers.1.mlp.up.weight"), (Shape{h, 2 * h}));
  EXPECT_EQ(ShapeOf(p, "layers.1.mlp.up.bias"), (Shape{2 * h}));
  // Row-parallel: input rows split; the bias stays whole.
  EXPECT_EQ(ShapeOf(p, "layers.0.attn.proj.weight"), (Shape{h / 2, h}));
  EXPECT_EQ(ShapeOf(p, "layers.0.attn.proj.bias"), (Shape{h}));
  EXPECT_EQ(ShapeOf(p, "layers.1.mlp.down.weight"), (Shape{2 * h, h}));
  // Vocabulary-parallel embedding (tied with the LM head), and its state.
  EXPECT_EQ(ShapeOf(p, "embed.tokens.weight"), (Shape{v / 2, h}));
  EXPECT_EQ(ShapeOf(p, "embed.tokens.weight.moment1"), (Shape{v / 2, h}));
  EXPECT_EQ(ShapeOf(p, "embed.tokens.weight@GRAD"), (Shape{v / 2, h}));
  // Replicated.
  EXPECT_EQ(ShapeOf(p, "embed.positions.weight"), (Shape{32, h}));
  EXPECT_EQ(ShapeOf(p, "layers.0.ln1.scale"), (Shape{h}));
  // Activations: two of four heads per rank; the vocabulary in halves.
  EXPECT_EQ(ShapeOf(p, "layers.0.attn.scores"), (Shape{8, 2, 32, 32}));
  EXPECT_EQ(ShapeOf(p, "lm_head.logits"), (Shape{8, 32, v / 2}));
  EXPECT_EQ(ShapeOf(p, "layers.0.mlp_residual"), (Shape{8, 32, h}));
}

TEST(TensorParallel, InsertsTheFAndGPairs) {
  Rewritten r = RunTp(2, 0);
  int identity = 0, fwd_allreduce = 0, bwd_allreduce = 0;
  for (Op* op : r.ctx->program().global_block().ops()) {
    if (op->type() == "identity") ++identity;
    if (op->type() != "allreduce") continue;
    EXPECT_EQ(op->desc().stream(), "mp");
    EXPECT_EQ(op->GetAttr<int32_t>("ring_id"), kMpRing);
    EXPECT_TRUE(op->HasRole(role::kComm));
    (op->HasRole(role::kForward) ? fwd_allreduce : bwd_allreduce)++;
  }
  // Per layer: f before qkv and up; g after proj and down. Plus f before the
  // LM head and g after the vocabulary-parallel embedding.
  EXPECT_EQ(identity, 2 * 2 + 1);
  EXPECT_EQ(fwd_allreduce, 2 * 2 + 1);
  // Each f's backward all-reduces its input gradient.
  EXPECT_EQ(bwd_allreduce, identity);
  int parallel_ce = 0;
  for (Op* op : r.ctx->program().global_block().ops()) {
    parallel_ce += op->type().rfind("c_softmax_with_cross_entropy", 0) == 0;
  }
  EXPECT_EQ(parallel_ce, 2);  // forward and grad
}

TEST(TensorParallel, StartupGivesEachRankItsSliceOfTheSerialInit) {
  RegisterAllCpuKernels();
  Rewritten r0 = RunTp(2, 0), r1 = RunTp(2, 1);
  Scope serial, rank0, rank1;
  for (auto [program, scope] : {std::pair{&r0.serial.startup, &serial},
                                std::pair{&r0.ctx->startup(), &rank0},
                                std::pair{&r1.ctx->startup(), &rank1}}) {
    auto exec = SerialExecutor::Create(*program, scope);
    ASSERT_TRUE(exec.ok()) << exec.status();
    ASSERT_TRUE((*exec)->Run().ok());
  }
  // Column split of qkv.weight [64, 192]: rank r holds columns [96r, 96r+96).
  auto full = serial.Find("layers.0.attn.qkv.weight")->ToFloatVector();
  auto part0 = rank0.Find("layers.0.attn.qkv.weight")->ToFloatVector();
  auto part1 = rank1.Find("layers.0.attn.qkv.weight")->ToFloatVector();
  ASSERT_EQ(part0.size(), 64u * 96);
  for (int row = 0; row < 64; ++row) {
    for (int col = 0; col < 96; ++col) {
      ASSERT_EQ(part0[row * 96 + col], full[row * 192 + col]);
      ASSERT_EQ(part1[row * 96 + col], full[row * 192 + 96 + col]);
    }
  }
  // Row split of the vocabulary: rank 1 holds rows 64..127.
  auto wte = serial.Find("embed.tokens.weight")->ToFloatVector();
  auto wte1 = rank1.Find("embed.tokens.weight")->ToFloatVector();
  ASSERT_EQ(wte1.size(), wte.size() / 2);
  EXPECT_TRUE(std::equal(wte1.begin(), wte1.end(), wte.begin() + wte.size() / 2));
  // Replicated parameters are identical everywhere.
  EXPECT_EQ(rank1.Find("embed.positions.weight")->ToFloatVector(),
            serial.Find("embed.positions.weight")->ToFloatVector());
}

TEST(TensorParallel, DegreeOneChangesNothing) {
  Rewritten r = RunTp(1, 0);
  EXPECT_EQ(r.ctx->program().ToProto().SerializeAsString(),
            r.serial.main.ToProto().SerializeAsString());
}

TEST(TensorParallel, HeadsMustSplitEvenly) {
  RegisterAllPasses();
  TrainingProgram tp = BuildGptTrainingProgram(GptPreset("gpt-tiny").value()).value();
  PassContext ctx(ParallelLayout{1, 3, 1}, 0, std::move(tp.main), std::move(tp.startup));
  PassManager pm;
  ASSERT_TRUE(pm.AddPipeline("tensor-parallel{degree=3}").ok());
  Status st = pm.Run(ctx);
  EXPECT_EQ(st.message(),
            "tensor-parallel: mp.degree (3) does not divide dim 0 (128) of "
            "embed.tokens.weight [128, 64]");
}

}  // namespace
}  // namespace loom
