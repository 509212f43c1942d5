// Serial training of a GPT preset on the synthetic dataset: the reference
// that every parallel schedule must reproduce.
#ifndef LOOM_RUNTIME_SERIAL_TRAINER_H_
#define LOOM_RUNTIME_SERIAL_TRAINER_H_

#include <memory>

#include "executor/serial_executor.h"
#include "models/gpt.h"
#include "models/synthetic_data.h"
#include "passes/amp.h"
#include "framework/grad_clip.h"
#include "runtime/trainer.h"

namespace loom {

struct StateHolder;  // runtime/training_state.h

class SerialTrainer : public Trainer {
 public:
  // Builds the training program, runs its startup program, and prepares
  // the main program.
  // Batches come from `data`, or the synthetic dataset when it is null.
  // `amp` rewrites the program for mixed precision (passes/amp.h).
  static StatusOr<std::unique_ptr<SerialTrainer>> Create(
      const GptConfig& config, const OptimizerConfig& optimizer,
      std::shared_ptr<const Dataset> data = nullptr, const AmpConfig& amp = {});

  // Trains on the global batch of `step`; returns that batch's mean loss.
  StatusOr<float> Step(int64_t step) override;

  // The parameters and optimizer state (a checkpoint's tensors).
  StatusOr<TrainingState> State() override;
  // Sets them from `state` (read from `source`, named in errors), which
  // must hold exactly this model's and optimizer's.
  Status SetState(const TrainingState& state, const std::string& source) override;
  bool HoldsWholeState() const override { return true; }
  const Dataset& data() const override { return *data_; }
  const GptConfig& config() const { return program_.config; }
  std::map<std::string, std::string> ModelRecord() const override {
    return GptConfigToMap(program_.config);
  }
  std::string Layout() const override { return "serial"; }
  float LastLearningRate() override { return LearningRateIn(scope_); }
  float LastGradNorm() override { return HostScalarIn(scope_, kGradNormVar); }
  float LossScale() override { return HostScalarIn(scope_, kLossScaleVar); }

  const TrainingProgram& program() const { return program_; }
  Scope& scope() { return scope_; }

 private:
  SerialTrainer(TrainingProgram program, std::shared_ptr<const Dataset> data);
  StateHolder Holder();

  TrainingProgram program_;
  std::shared_ptr<const Dataset> data_;
  Scope scope_;
  std::unique_ptr<SerialExecutor> executor_;
  std::vector<int64_t> tokens_, labels_;
};

}  // namespace loom

#endif  // LOOM_RUNTIME_SERIAL_TRAINER_H_
