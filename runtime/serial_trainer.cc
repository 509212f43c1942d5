#include "runtime/serial_trainer.h"

#include <cstring>

#include "framework/grad_clip.h"
#include "framework/shape_inference.h"
#include "runtime/finite_loss.h"
#include "runtime/host_memory.h"
#include "runtime/training_state.h"

namespace loom {

SerialTrainer::SerialTrainer(TrainingProgram program, std::shared_ptr<const Dataset> data)
    : program_(std::move(program)), data_(std::move(data)) {}

StatusOr<std::unique_ptr<SerialTrainer>> SerialTrainer::Create(
    const GptConfig& config, const OptimizerConfig& optimizer,
    std::shared_ptr<const Dataset> data, const AmpConfig& amp) {
  LOOM_ASSIGN_OR_RETURN(TrainingProgram program,
                        BuildGptTrainingProgram(config, optimizer));
  LOOM_RETURN_IF_ERROR(ApplyAmp(program.main, amp, &program.startup));
  // The serial executor keeps every var of the program for the step.
  int64_t bytes = 0;
  for (const auto& [name, var] : program.main.global_block().vars()) {
    const TensorMeta meta = MetaOf(var);
    bytes += NumElements(meta.shape) * SizeOf(meta.dtype);
  }
  LOOM_RETURN_IF_ERROR(CheckFitsInHost(bytes, StrCat(config.name, " trained serially"),
                                       ModelSizeFields(config)));
  if (data == nullptr) {
    data = std::make_shared<SyntheticDataset>(config.vocab_size, config.seq_len, config.seed);
  }
  std::unique_ptr<SerialTrainer> t(new SerialTrainer(std::move(program), std::move(data)));
  LOOM_ASSIGN_OR_RETURN(auto startup,
                        SerialExecutor::Create(t->program_.startup, &t->scope_));
  LOOM_RETURN_IF_ERROR(startup->Run().WithContext("startup program"));
  std::vector<std::string> fetch = {kLossVar};
  if (t->program_.main.global_block().HasVar(kGradNormVar)) fetch.push_back(kGradNormVar);
  LOOM_ASSIGN_OR_RETURN(t->executor_,
                        SerialExecutor::Create(t->program_.main, &t->scope_, {fetch}));
  return t;
}

StatusOr<float> SerialTrainer::Step(int64_t step) {
  const GptConfig& c = program_.config;
  data_->Batch(step, c.batch_size, &tokens_, &labels_);
  const TensorMeta meta{proto::INT64, {c.batch_size, c.seq_len}};
  for (auto [name, values] : {std::pair{kTokensVar, &tokens_},
                              std::pair{kLabelsVar, &labels_}}) {
    Tensor* t = scope_.Var(name);
    t->Resize(meta);
    std::memcpy(t->raw_data(), values->data(), t->bytes());
  }
  LOOM_RETURN_IF_ERROR(executor_->Run({step, 0}).WithContext(StrCat("step ", step)));
  const float loss = scope_.Find(kLossVar)->data<float>()[0];
  LOOM_RETURN_IF_ERROR(CheckFiniteLoss(loss, step));
  return loss;
}

StateHolder SerialTrainer::Holder() {
  StateHolder h;
  h.startup = &program_.startup;
  h.optimizer_state = OptimizerStateVars(program_.main.global_block());
  h.scope = &scope_;
  return h;
}

StatusOr<TrainingState> SerialTrainer::State() { return GatherState({Holder()}); }

Status SerialTrainer::SetState(const TrainingState& state, const std::string& source) {
  std::set<std::string> used;
  LOOM_RETURN_IF_ERROR(ScatterState(state, Holder(), source, &used));
  return CheckAllUsed(state, used, source);
}

}  // namespace loom
