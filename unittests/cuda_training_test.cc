// Training on GPUs equals training on the CPU: gpt-tiny on one GPU against
// the serial CPU run over 20 steps, and 2 and 4 GPUs under every schedule
// against serial training, every parameter and optimizer state compared
// (the run's state read back through its host mirror). They need devices
// and skip, saying how many they need, where there are fewer; on this
// project's development machine (no GPU) they compile and link only.
#include <gtest/gtest.h>

#include <cmath>

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

TEST(CudaTraining, FourGpusUnderEveryScheduleEqualSerial) {
  LOOM_NEED_CUDA_DEVICES(4);
  ExpectCasesMatchSerial({{2, 1, 2, "FThenB"}, {1, 2, 2, "1F1B"}, {2, 1, 2, "Eager1F1B"},
                          {1, 1, 4, "ZBH1"}, {1, 2, 2, "VPP", 2}, {1, 2, 2, "1F1B-overlap"},
                          {2, 2, 1, "1F1B-overlap"}});
}
#endif

}  // namespace
}  // namespace loom
