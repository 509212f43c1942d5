// Training (or just running) any program, as Paddle's static mode runs a
// saved ProgramDesc: one from `loom model` or `loom opt`, or written by
// hand. The IR is the interface; nothing here knows the model.
//
// Each step feeds every data var: `tokens` and `labels` from a dataset
// when the program looks them up in an embedding (the vocabulary is its
// row count, the sequence length the var's); every other data var with
// values drawn from (seed, step, var, element), integers kept below the
// row count of the embedding or the class count of the cross entropy
// that reads them. Then the program runs once on the serial executor.
#ifndef LOOM_RUNTIME_PROGRAM_TRAINER_H_
#define LOOM_RUNTIME_PROGRAM_TRAINER_H_

#include <memory>
#include <string>
#include <vector>

#include "executor/serial_executor.h"
#include "framework/program.h"
#include "models/dataset.h"
#include "runtime/trainer.h"

namespace loom {

struct StateHolder;  // runtime/training_state.h

// What a program's token feed needs of a dataset: the vocabulary (the rows
// of the embedding reading `tokens`) and the sequence length; zeros when
// the program reads no tokens that way.
struct TokenFeed {
  int64_t vocab = 0;
  int64_t seq_len = 0;
};
TokenFeed TokenFeedOf(const Program& program);

// A program's identity for checkpoints (Trainer::ModelRecord): its op
// count and the CRC-32 of its bytes, so that only a run of the same
// program resumes a checkpoint of it.
std::map<std::string, std::string> ProgramRecord(const Program& program);

class ProgramTrainer : public Trainer {
 public:
  struct Options {
    // Where `tokens` come from; null: the synthetic dataset (seeded by
    // `seed`) when the program reads tokens.
    std::shared_ptr<const Dataset> data;
    int64_t seed = 1;
    // Vars to keep after each step for the caller to read (FetchVar); the
    // loss var, when the program has one, is kept anyway.
    std::vector<std::string> fetch;
  };

  // `main` and `startup` (empty: the main program must initialize its
  // persistable vars itself) are verified, the startup run, the main
  // prepared. `source` names them in errors.
  static StatusOr<std::unique_ptr<ProgramTrainer>> Create(Program main, Program startup,
                                                          const std::string& source,
                                                          Options options);

  // Runs the main program once on `step`'s feeds; returns the loss var's
  // first value, or NaN when the program has no loss var.
  StatusOr<float> Step(int64_t step) override;
  StatusOr<TrainingState> State() override;
  Status SetState(const TrainingState& state, const std::string& source) override;
  bool HoldsWholeState() const override { return true; }
  const Dataset& data() const override { return *data_; }
  std::map<std::string, std::string> ModelRecord() const override;
  std::string Layout() const override { return "serial"; }

  // A var kept after the last step: a fetch, the loss, or persistable.
  StatusOr<const Tensor*> FetchVar(const std::string& name) const;

 private:
  ProgramTrainer() = default;
  struct Feed {
    std::string name;
    TensorMeta meta;
    int64_t limit = 0;  // integers: values in [0, limit); 0: floats
    bool from_dataset = false;
  };
  StateHolder Holder();

  std::string source_;
  Options options_;
  Program main_, startup_;
  Scope scope_;
  std::unique_ptr<SerialExecutor> executor_;
  std::vector<Feed> feeds_;
  std::shared_ptr<const Dataset> data_;
  bool has_loss_ = false;
  std::vector<int64_t> tokens_, labels_;
};

}  // namespace loom

#endif  // LOOM_RUNTIME_PROGRAM_TRAINER_H_
