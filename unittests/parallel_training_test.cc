// Parallel training reproduces serial training: the multi-stream rank
// executor over lowered plans, against SerialTrainer on the same global
// batches and seed.
#include <cmath>

#include <gtest/gtest.h>

#include "tools/parallel_trainer.h"
#include "tools/serial_trainer.h"

namespace loom {
namespace {

proto::Strategy Make(int dp, int mp, int pp, int micro_batches,
                     const std::string& schedule, int vpp = 1) {
  proto::Strategy s;
  s.mutable_dp()->set_degree(dp);
  s.mutable_mp()->set_degree(mp);
  s.mutable_pipeline()->set_degree(pp);
  s.mutable_pipeline()->set_enable(pp > 1);
  s.mutable_pipeline()->set_micro_batches(micro_batches);
  s.mutable_pipeline()->set_schedule_mode(schedule);
  s.mutable_pipeline()->set_vpp_degree(vpp);
  return s;
}

std::vector<float> SerialLosses(const GptConfig& c, int steps) {
  auto t = SerialTrainer::Create(c, {}).value();
  std::vector<float> out;
  for (int s = 0; s < steps; ++s) out.push_back(t->Step(s).value());
  return out;
}

// Gradient accumulation sums micro-batch gradients where serial training
// takes one mean over the batch: the same numbers added in another order,
// so fp32 results agree to rounding (~1e-6 relative per op), which AdamW's
// normalization can amplify over steps; 1e-4 relative on the loss over 3
// steps leaves room for that and none for a wrong gradient, which moves
// the loss by far more.
constexpr float kRelTol = 1e-4f;

TEST(ParallelTraining, GradientAccumulationMatchesSerial) {
  GptConfig c = GptPreset("gpt-tiny").value();
  const auto serial = SerialLosses(c, 3);
  for (int mb : {1, 2, 4}) {
    SCOPED_TRACE(StrCat(mb, " micro-batches"));
    auto t = ParallelTrainer::Create(c, {}, Make(1, 1, 1, mb, "FThenB"));
    ASSERT_TRUE(t.ok()) << t.status();
    for (int s = 0; s < 3; ++s) {
      auto loss = (*t)->Step(s);
      ASSERT_TRUE(loss.ok()) << loss.status();
      EXPECT_NEAR(*loss, serial[s], kRelTol * serial[s]) << "step " << s;
    }
  }
}

}  // namespace
}  // namespace loom
