// Every parameter of every rank, after SGD steps, equals serial training's
// (its shard of it), on every layout and schedule. SGD moves a parameter by
// the gradient itself, where AdamW divides most of a gradient's scale away:
// a gradient twice too large passes a loss or AdamW comparison and fails
// this one (issue 10).
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "unittests/parameter_compare.h"

namespace loom {
namespace {

struct Case {
  int dp, mp, pp;
  const char* schedule;
  int vpp = 1;
  int micro_batches = 4;
  bool op_split = false;
};

// Two SGD steps (lr 0.5, so that a wrong gradient moves far) of `c` under
// `strategy` against serial training: each step's loss within 1e-5, then
// every parameter of every rank (its shard) within 2e-5.
void TwoSgdStepsMatchSerial(const GptConfig& c, const proto::Strategy& strategy) {
  OptimizerConfig sgd;
  sgd.type = "sgd";
  sgd.learning_rate = 0.5f;
  auto serial = SerialTrainer::Create(c, sgd).value();
  ParallelTrainer::Options options;
  options.comm.timeout = std::chrono::seconds(30);
  auto t = ParallelTrainer::Create(c, sgd, strategy, options);
  ASSERT_TRUE(t.ok()) << t.status();
  for (int s = 0; s < 2; ++s) {
    auto want = serial->Step(s);
    auto loss = (*t)->Step(s);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(loss.ok()) << loss.status();
    EXPECT_NEAR(*loss, *want, 1e-5 * std::fabs(*want)) << "loss of step " << s;
  }
  // gpt-tiny has 12 parameters a layer and 4 outside them.
  EXPECT_GE(ExpectEveryParameterMatches(**t, *serial, 2e-5), c.num_layers * 12 + 4);
}

TEST(ParameterParity, EveryParameterOfEveryLayoutAfterSgdSteps) {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 4;
  c.batch_size = 16;
  OptimizerConfig sgd;
  sgd.type = "sgd";
  sgd.learning_rate = 0.5f;  // large, so that a wrong gradient moves far
  for (const Case& k : {Case{2, 2, 2, "1F1B"}, Case{1, 2, 4, "ZBH1"}, Case{4, 1, 2, "FThenB"},
                        Case{1, 2, 2, "VPP", 2}, Case{2, 1, 2, "Eager1F1B"},
                        Case{1, 2, 2, "1F1B-overlap"}, Case{2, 2, 1, "1F1B-overlap"}}) {
    SCOPED_TRACE(StrCat(k.schedule, " dp=", k.dp, " mp=", k.mp, " pp=", k.pp));
    auto serial = SerialTrainer::Create(c, sgd).value();
    ParallelTrainer::Options options;
    options.comm.timeout = std::chrono::seconds(30);
    auto t = ParallelTrainer::Create(c, sgd, MakeStrategy(k.dp, k.mp, k.pp, 4, k.schedule, k.vpp),
                                     options);
    ASSERT_TRUE(t.ok()) << t.status();
    for (int s = 0; s < 2; ++s) {
      ASSERT_TRUE(serial->Step(s).ok());
      auto loss = (*t)->Step(s);
      ASSERT_TRUE(loss.ok()) << loss.status();
    }
    // gpt-tiny has 12 parameters a layer and 4 outside them; every rank
    // holds its stages' share, so the world holds at least all of them.
    EXPECT_GE(ExpectEveryParameterMatches(**t, *serial, 2e-5), 4 * 12 + 4);
  }
}

// ZB-V on two and four stages: chunk 0 runs down the stages and chunk 1 back
// up, so stage 0 holds the embedding and the head (the tied weight is not
// shared across stages) and the last stage hands its chunk 0's output to its
// chunk 1 without a transfer. 8 layers (2 a chunk on 4 stages) and 8
// micro-batches (at least 2 x 4 - 1); 6 layers on 2 stages split unevenly
// (2 and 1 on stage 0, 1 and 2 on stage 1).
TEST(ParameterParity, ZBVOnTwoAndFourStagesAfterSgdSteps) {
  for (const auto& [layers, k] :
       {std::pair{8, Case{1, 2, 2, "ZBV", 2, 8}}, std::pair{8, Case{2, 1, 2, "ZBV", 2, 4}},
        std::pair{8, Case{1, 1, 4, "ZBV", 2, 8}}, std::pair{6, Case{1, 1, 2, "ZBV", 2, 4}}}) {
    SCOPED_TRACE(StrCat(layers, " layers, dp=", k.dp, " mp=", k.mp, " pp=", k.pp,
                        " micro-batches=", k.micro_batches));
    GptConfig c = GptPreset("gpt-tiny").value();
    c.num_layers = layers;
    c.batch_size = 16;
    TwoSgdStepsMatchSerial(c, MakeStrategy(k.dp, k.mp, k.pp, k.micro_batches, k.schedule, k.vpp));
  }
}

// With dropout, the masks too must be serial training's: each element's
// mask is keyed on the step and its global place (batch row, then its place
// in the full row: the head, under a tensor-parallel split of attention
// probs), so a dp replica's or a micro-batch's rows and an mp rank's heads
// draw what the serial step draws there. Keyed on the element's local
// index instead, every layout here fails (and a mask repeated every step
// would fail the dropout unit tests).
TEST(ParameterParity, WithDropoutEveryLayoutDrawsSerialMasks) {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 4;
  c.batch_size = 16;
  c.dropout = 0.1f;
  for (const Case& k :
       {Case{2, 2, 2, "1F1B"}, Case{1, 2, 2, "VPP", 2}, Case{2, 1, 1, "FThenB", 1, 4},
        Case{1, 2, 2, "1F1B-overlap"}, Case{2, 2, 1, "1F1B-overlap"}, Case{1, 2, 4, "ZBH1"},
        Case{1, 2, 1, "FThenB", 1, 2, /*op_split=*/true}}) {
    SCOPED_TRACE(StrCat(k.schedule, " dp=", k.dp, " mp=", k.mp, " pp=", k.pp, " vpp=", k.vpp,
                        " micro-batches=", k.micro_batches, k.op_split ? " op-split" : ""));
    proto::Strategy strategy =
        MakeStrategy(k.dp, k.mp, k.pp, k.micro_batches, k.schedule, k.vpp);
    if (k.op_split) {
      strategy.mutable_passes()->set_op_split(true);
      strategy.mutable_passes()->set_op_split_parts(2);
    }
    TwoSgdStepsMatchSerial(c, strategy);
  }
}

}  // namespace
}  // namespace loom
