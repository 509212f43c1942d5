// Serial training of a GPT preset on the synthetic dataset: the reference
// that every parallel schedule must reproduce.
#ifndef LOOM_RUNTIME_SERIAL_TRAINER_H_
#define LOOM_RUNTIME_SERIAL_TRAINER_H_

#include <memory>

#include "executor/serial_executor.h"
#include "models/gpt.h"
#include "models/synthetic_data.h"

namespace loom {

class SerialTrainer {
 public:
  // Builds the training program, runs its startup program, and prepares
  // the main program.
  static StatusOr<std::unique_ptr<SerialTrainer>> Create(
      const GptConfig& config, const OptimizerConfig& optimizer);

  // Trains on the global batch of `step`; returns that batch's mean loss.
  StatusOr<float> Step(int64_t step);

  const TrainingProgram& program() const { return program_; }
  Scope& scope() { return scope_; }

 private:
  SerialTrainer(TrainingProgram program, const GptConfig& config);

  TrainingProgram program_;
  SyntheticDataset data_;
  Scope scope_;
  std::unique_ptr<SerialExecutor> executor_;
  std::vector<int64_t> tokens_, labels_;
};

}  // namespace loom

#endif  // LOOM_RUNTIME_SERIAL_TRAINER_H_
