// The GPT builder, the synthetic dataset and serial training.
#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "framework/shape_inference.h"
#include "framework/verifier.h"
#include "models/gpt.h"
#include "models/synthetic_data.h"
#include "runtime/serial_trainer.h"

namespace loom {
namespace {

int64_t CountParameterElements(const Program& p) {
  int64_t n = 0;
  for (const auto& [name, v] : p.global_block().vars()) {
    if (v.is_parameter()) n += NumElements(MetaOf(v).shape);
  }
  return n;
}

TEST(GptBuilder, TinyProgramVerifiesAndHasEveryPhase) {
  auto tp = BuildGptTrainingProgram(GptPreset("gpt-tiny").value());
  ASSERT_TRUE(tp.ok()) << tp.status();
  EXPECT_TRUE(VerifyProgram(tp->main).ok());
  EXPECT_TRUE(VerifyProgram(tp->startup).ok());
  std::set<std::string> types;
  int forward = 0, backward = 0, optimize = 0;
  for (Op* op : tp->main.global_block().ops()) {
    types.insert(op->type());
    forward += op->HasRole(role::kForward);
    backward += op->HasRole(role::kBackward);
    optimize += op->HasRole(role::kOptimize);
  }
  for (const char* t : {"lookup_table", "layer_norm", "matmul", "softmax", "gelu",
                        "softmax_with_cross_entropy", "matmul_grad", "adamw"}) {
    EXPECT_TRUE(types.count(t)) << t;
  }
  EXPECT_GT(forward, 0);
  EXPECT_GT(backward, forward);
  // One update per parameter; the tied embedding gets one gradient.
  EXPECT_EQ(optimize, static_cast<int>(tp->param_grads.size()));
  EXPECT_EQ(CountParameterElements(tp->main), tp->config.NumParameters());
}

TEST(GptBuilder, TiedEmbeddingGradientIsSummedOnce) {
  auto tp = BuildGptTrainingProgram(GptPreset("gpt-tiny").value());
  ASSERT_TRUE(tp.ok());
  const Block& b = tp->main.global_block();
  Op* producer = b.FirstProducer(GradVarName("embed.tokens.weight"));
  ASSERT_NE(producer, nullptr);
  EXPECT_EQ(producer->type(), "sum");
  EXPECT_EQ(b.Producers(GradVarName("embed.tokens.weight")).size(), 1u);
}

TEST(GptBuilder, PublishedSizesHaveTheirParameterCounts) {
  // GPT-3 paper, table 2.1 (13B uses d_model 5120; see gpt.cc), and
  // Korthikanti et al. 2022, table 3.
  const std::pair<const char*, double> kSizes[] = {
      {"gpt3-1.3b", 1.3e9}, {"gpt3-6.7b", 6.7e9}, {"gpt3-13b", 13e9},
      {"gpt3-175b", 175e9}, {"gpt-22b", 22e9},     {"gpt-530b", 530e9},
      {"gpt-1t", 1e12}};
  for (const auto& [name, published] : kSizes) {
    GptConfig c = GptPreset(name).value();
    EXPECT_NEAR(c.NumParameters() / published, 1.0, 0.03) << name;
  }
}

TEST(GptBuilder, Gpt3_175bBuildsAndVerifies) {
  auto tp = BuildGptTrainingProgram(GptPreset("gpt3-175b").value());
  ASSERT_TRUE(tp.ok()) << tp.status();
  EXPECT_EQ(CountParameterElements(tp->main), tp->config.NumParameters());
  EXPECT_TRUE(VerifyProgram(tp->main).ok());
  EXPECT_EQ(MetaOf(*tp->main.global_block().FindVar("lm_head.logits")).shape,
            (Shape{1536, 2048, 50304}));
}

TEST(GptBuilder, BadConfigNamesTheField) {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_heads = 5;
  Status s = ValidateGptConfig(c);
  EXPECT_EQ(s.message(), "model.num_heads (5) must divide model.hidden (64)");
  EXPECT_EQ(GptPreset("gpt-huge").status().message(),
            "unknown preset 'gpt-huge' (known: gpt-tiny, gpt-small, gpt3-1.3b, "
            "gpt3-6.7b, gpt3-13b, gpt3-175b, gpt-22b, gpt-530b, gpt-1t)");
}

TEST(SyntheticData, DeterministicAndShifted) {
  SyntheticDataset a(128, 16, 3), b(128, 16, 3), c(128, 16, 4);
  std::vector<int64_t> ta, la, tb, lb, tc, lc;
  a.Batch(5, 4, &ta, &la);
  b.Batch(5, 4, &tb, &lb);
  c.Batch(5, 4, &tc, &lc);
  EXPECT_EQ(ta, tb);
  EXPECT_EQ(la, lb);
  EXPECT_NE(ta, tc);
  for (int r = 0; r < 4; ++r) {
    for (int i = 0; i + 1 < 16; ++i) EXPECT_EQ(la[r * 16 + i], ta[r * 16 + i + 1]);
  }
  for (int64_t t : ta) {
    EXPECT_GE(t, 0);
    EXPECT_LT(t, 128);
  }
}

TEST(SerialTraining, GptTinyLossHalvesIn200Steps) {
  OptimizerConfig opt;
  opt.learning_rate = 3e-3f;  // loom train's default
  auto trainer = SerialTrainer::Create(GptPreset("gpt-tiny").value(), opt);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  float first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    auto loss = (*trainer)->Step(step);
    ASSERT_TRUE(loss.ok()) << loss.status();
    if (step == 0) first = *loss;
    last = *loss;
  }
  // A freshly initialized model predicts about uniformly: log(vocab).
  EXPECT_NEAR(first, std::log(128.0f), 0.1f);
  EXPECT_LT(last, 0.5f * first);
}

TEST(SerialTraining, BitIdenticalAcrossRuns) {
  std::vector<float> losses[2];
  for (auto& run : losses) {
    auto trainer = SerialTrainer::Create(GptPreset("gpt-tiny").value(), {});
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    for (int step = 0; step < 3; ++step) run.push_back((*trainer)->Step(step).value());
  }
  EXPECT_EQ(losses[0], losses[1]);
}

}  // namespace
}  // namespace loom
