// What the training loop needs of a trainer, serial or parallel: steps,
// and the state a checkpoint holds.
#ifndef LOOM_RUNTIME_TRAINER_H_
#define LOOM_RUNTIME_TRAINER_H_

#include <cmath>
#include <map>
#include <optional>
#include <string>

#include "executor/scope.h"
#include "framework/optimizer.h"
#include "models/dataset.h"
#include "models/gpt.h"
#include "runtime/checkpoint.h"

namespace loom {

class Trainer {
 public:
  virtual ~Trainer() = default;
  // Trains on the global batch of `step`; returns its mean loss, or NaN in
  // a process that does not hold it (one rank of a launch). A loss that
  // is not finite is a kAborted error naming the step.
  virtual StatusOr<float> Step(int64_t step) = 0;
  // The parameters and optimizer state as full tensors by name.
  virtual StatusOr<TrainingState> State() = 0;
  // Sets them from `state` (read from `source`, named in errors).
  virtual Status SetState(const TrainingState& state, const std::string& source) = 0;
  // Whether State() can gather everything here (every rank is local).
  virtual bool HoldsWholeState() const = 0;
  // The state for the checkpoint after `steps_done` steps: the full
  // tensors in the process that writes it; nullopt in the other processes
  // of a launch, which hand their ranks' shards over to that one instead.
  virtual StatusOr<std::optional<TrainingState>> StateForCheckpoint(int64_t steps_done) {
    LOOM_ASSIGN_OR_RETURN(TrainingState state, State());
    return std::optional<TrainingState>(std::move(state));
  }
  // What a resumed run must match, by key: the model config
  // (GptConfigToMap), or a program's fingerprint.
  virtual std::map<std::string, std::string> ModelRecord() const = 0;
  // Where its batches come from.
  virtual const Dataset& data() const = 0;
  // How it trains, for checkpoints' readers: "serial", "dp=2 mp=2 pp=2 1F1B".
  virtual std::string Layout() const = 0;
  // The learning rate the last step used, where this process holds it in
  // host memory; NaN elsewhere.
  virtual float LastLearningRate() { return NAN; }
  // The global gradient norm of the last step, before clipping, where the
  // program clips (framework/grad_clip.h) and this process holds it; NaN
  // elsewhere.
  virtual float LastGradNorm() { return NAN; }
  // fp16's dynamic loss scale as it stands (passes/amp.h), where this
  // process holds it on the host; NaN elsewhere or without loss scaling.
  virtual float LossScale() { return NAN; }
};

// The fp32 scalar `var` in `scope`, or NaN where it holds none on the host.
inline float HostScalarIn(const Scope& scope, const std::string& var) {
  const Tensor* t = scope.Find(var);
  if (t == nullptr || !t->initialized() || t->device_type() != DeviceType::kCpu ||
      t->dtype() != proto::FP32 || t->numel() != 1) {
    return NAN;
  }
  return t->data<float>()[0];
}

inline float LearningRateIn(const Scope& scope) { return HostScalarIn(scope, kLearningRateVar); }

}  // namespace loom

#endif  // LOOM_RUNTIME_TRAINER_H_
