// Training on GPUs equals training on the CPU: gpt-tiny on one GPU against
// the serial CPU run over 20 steps, and 2 and 4 GPUs under every schedule
// against serial training, every parameter and optimizer state compared
// (the run's state read back through its host mirror), and bf16 O2 with
// bf16 gradient reduction on 2 GPUs against the CPU. They need devices
// and skip, saying how many they need, where there are fewer; on this
// project's development machine (no GPU) they compile and link only.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "passes/strategy.h"
#include "runtime/parallel_trainer.h"
#include "runtime/serial_trainer.h"

#ifdef LOOM_WITH_CUDA
#include "executor/cuda/cuda_probe.h"
#endif

namespace loom {
namespace {

#ifndef LOOM_WITH_CUDA
TEST(CudaTraining, NotBuilt) {
  GTEST_SKIP() << "built without the CUDA backend (LOOM_CUDA=OFF, or configure found no "
                  "nvcc, CUDA toolkit and NCCL): nothing of it to test";
}
#else
#define LOOM_NEED_CUDA_DEVICES(n)                                                         \
  {                                                                                       \
    const CudaProbe probe = ProbeCuda();                                                  \
    if (probe.devices < (n)) {                                                            \
      GTEST_SKIP() << "needs " << (n) << " CUDA device(s), this host has " << probe.devices \
                   << (probe.why_none.empty() ? "" : " (" + probe.why_none + ")");        \
    }                                                                                     \
  }

// The largest difference over every tensor of `want`, each of which `have`
// must hold with the same shape; returns how many it compared.
int ExpectStateMatches(const TrainingState& have, const TrainingState& want, double tolerance) {
  int compared = 0;
  using Part = std::map<std::string, Tensor> TrainingState::*;
  for (Part part : {&TrainingState::parameters, &TrainingState::optimizer}) {
    for (const auto& [name, w] : want.*part) {
      auto it = (have.*part).find(name);
      if (it == (have.*part).end()) {
        ADD_FAILURE() << name << " is missing";
        continue;
      }
      if (it->second.shape() != w.shape()) {
        ADD_FAILURE() << name << " is " << ShapeToString(it->second.shape()) << ", not "
                      << ShapeToString(w.shape());
        continue;
      }
      const std::vector<float> a = it->second.ToFloatVector();
      const std::vector<float> b = w.ToFloatVector();
      double worst = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
      }
      EXPECT_LE(worst, tolerance) << name;
      ++compared;
    }
  }
  return compared;
}

TEST(CudaTraining, GptTinyOnOneGpuEqualsTheCpuOverTwentySteps) {
  LOOM_NEED_CUDA_DEVICES(1);
  const GptConfig c = GptPreset("gpt-tiny").value();
  const OptimizerConfig adamw;
  auto cpu = SerialTrainer::Create(c, adamw).value();
  ParallelTrainer::Options options;
  options.device = DeviceType::kCuda;
  auto gpu = ParallelTrainer::Create(c, adamw, proto::Strategy(), options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  for (int s = 0; s < 20; ++s) {
    const float want = cpu->Step(s).value();
    StatusOr<float> have = (*gpu)->Step(s);
    ASSERT_TRUE(have.ok()) << have.status();
    EXPECT_NEAR(*have, want, 1e-4) << "step " << s;
  }
  EXPECT_GT(ExpectStateMatches((*gpu)->State().value(), cpu->State().value(), 1e-4), 16);
}

struct Case {
  int dp, mp, pp;
  const char* schedule;
  int vpp = 1;
};

// SGD at a large rate, so that a wrong gradient moves a parameter far.
void ExpectCasesMatchSerial(const std::vector<Case>& cases) {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 4;
  c.batch_size = 16;
  OptimizerConfig sgd;
  sgd.type = "sgd";
  sgd.learning_rate = 0.5f;
  for (const Case& k : cases) {
    SCOPED_TRACE(StrCat(k.schedule, " dp=", k.dp, " mp=", k.mp, " pp=", k.pp));
    auto serial = SerialTrainer::Create(c, sgd).value();
    ParallelTrainer::Options options;
    options.device = DeviceType::kCuda;
    options.comm.timeout = std::chrono::seconds(60);
    auto t = ParallelTrainer::Create(c, sgd, MakeStrategy(k.dp, k.mp, k.pp, 4, k.schedule, k.vpp),
                                     options);
    ASSERT_TRUE(t.ok()) << t.status();
    for (int s = 0; s < 2; ++s) {
      ASSERT_TRUE(serial->Step(s).ok());
      StatusOr<float> loss = (*t)->Step(s);
      ASSERT_TRUE(loss.ok()) << loss.status();
    }
    EXPECT_GE(ExpectStateMatches((*t)->State().value(), serial->State().value(), 1e-4),
              4 * 12 + 4);
  }
}

TEST(CudaTraining, TwoGpusUnderEveryScheduleEqualSerial) {
  LOOM_NEED_CUDA_DEVICES(2);
  ExpectCasesMatchSerial({{1, 1, 2, "FThenB"}, {1, 1, 2, "1F1B"}, {1, 1, 2, "Eager1F1B"},
                          {1, 1, 2, "ZBH1"}, {1, 1, 2, "VPP", 2}, {1, 1, 2, "1F1B-overlap"},
                          {2, 1, 1, "FThenB"}, {1, 2, 1, "1F1B"}});
}

// bf16 O2 with the dp gradients reduced in bf16 (NCCL's bf16 all-reduce
// of the rounded gradients, framework/wire_dtype.h) against the same
// layouts on the CPU (Gloo). Both round every op's output to bf16, but the
// GEMMs accumulate in different orders, so a rounding may land a unit
// (2^-8) apart; each parameter may differ by 5% of how far it moved in
// two SGD steps, where a gradient 10% off differs by 10%. Never run on a
// device yet: the bound is the CPU tests' (grad_reduce_dtype_test, 0.8%
// between fp32 and bf16 reduction) with room for the GEMMs.
TEST(CudaTraining, TwoGpusTrainBf16O2AsTheCpuDoes) {
  LOOM_NEED_CUDA_DEVICES(2);
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 2;
  c.batch_size = 8;
  OptimizerConfig sgd;
  sgd.type = "sgd";
  sgd.learning_rate = 0.5f;
  for (const Case& k : {Case{2, 1, 1, "1F1B"}, Case{1, 2, 1, "1F1B"}, Case{1, 1, 2, "1F1B"}}) {
    SCOPED_TRACE(StrCat(k.schedule, " dp=", k.dp, " mp=", k.mp, " pp=", k.pp));
    proto::Strategy strategy = MakeStrategy(k.dp, k.mp, k.pp, 2, k.schedule);
    strategy.mutable_amp()->set_level("O2");
    strategy.mutable_amp()->set_grad_reduce_dtype("bf16");
    ParallelTrainer::Options options;
    options.comm.timeout = std::chrono::seconds(60);
    auto cpu = ParallelTrainer::Create(c, sgd, strategy, options);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    options.device = DeviceType::kCuda;
    auto gpu = ParallelTrainer::Create(c, sgd, strategy, options);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    const TrainingState init = (*cpu)->State().value();
    for (int s = 0; s < 2; ++s) {
      ASSERT_TRUE((*cpu)->Step(s).ok());
      StatusOr<float> loss = (*gpu)->Step(s);
      ASSERT_TRUE(loss.ok()) << loss.status();
    }
    const TrainingState want = (*cpu)->State().value(), have = (*gpu)->State().value();
    for (const auto& [name, w] : want.parameters) {
      const std::vector<float> a = have.parameters.at(name).ToFloatVector();
      const std::vector<float> b = w.ToFloatVector();
      const std::vector<float> b0 = init.parameters.at(name).ToFloatVector();
      double moved = 0, diff = 0;
      for (size_t i = 0; i < b.size(); ++i) {
        moved = std::max(moved, static_cast<double>(std::fabs(b[i] - b0[i])));
        diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
      }
      EXPECT_LE(diff, 0.05 * moved) << name;
    }
  }
}

TEST(CudaTraining, FourGpusUnderEveryScheduleEqualSerial) {
  LOOM_NEED_CUDA_DEVICES(4);
  ExpectCasesMatchSerial({{2, 1, 2, "FThenB"}, {1, 2, 2, "1F1B"}, {2, 1, 2, "Eager1F1B"},
                          {1, 1, 4, "ZBH1"}, {1, 2, 2, "VPP", 2}, {1, 2, 2, "1F1B-overlap"},
                          {2, 2, 1, "1F1B-overlap"}});
}
#endif

}  // namespace
}  // namespace loom
