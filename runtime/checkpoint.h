// Checkpoints of a training run. One checkpoint is a directory
// `<save_dir>/step-NNNNNNNN` holding
//   model.safetensors      the parameters, full tensors by name;
//   optimizer.safetensors  the optimizer state (moments, beta powers);
//   manifest.json          the step, the model config, the data position,
//                          the RNG state and each file's size and CRC-32.
// Tensors are whole whatever layout saved them, so a run saved under
// dp2 x mp2 x pp2 resumes under mp4 or serially, and PyTorch loads
// model.safetensors as it is. A checkpoint is written in a hidden
// directory beside its final name and renamed into place once every file
// is on disk, so a kill during a save leaves the previous checkpoint the
// latest complete one.
#ifndef LOOM_RUNTIME_CHECKPOINT_H_
#define LOOM_RUNTIME_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <string>

#include "executor/tensor.h"
#include "framework/status.h"

namespace loom {

// What training holds between steps, as full (unsharded) tensors by name.
struct TrainingState {
  std::map<std::string, Tensor> parameters;
  std::map<std::string, Tensor> optimizer;
};

struct CheckpointInfo {
  // Steps completed: training resumes at this step, whose batch is the
  // next one the data gives and whose dropout masks are keyed by it (the
  // RNG is counter-based: its whole state is the seed and the step).
  int64_t step = 0;
  // The model config (GptConfigToMap), which a resumed run must match.
  std::map<std::string, std::string> model;
  // Where the batches come from ("synthetic", or a file), for the reader.
  std::string data;
  // What saved it ("serial", "dp=2 mp=2 pp=2 1F1B"), for the reader.
  std::string layout;
};

struct Checkpoint {
  std::string path;  // the checkpoint's directory
  CheckpointInfo info;
  TrainingState state;
};

// Writes `state` as the checkpoint of `info.step` under `save_dir` and
// removes all but the newest `keep` checkpoints there (and partial ones a
// killed run left). Returns the checkpoint's directory. One writer per
// save_dir.
StatusOr<std::string> SaveCheckpoint(const std::string& save_dir, const CheckpointInfo& info,
                                     const TrainingState& state, int keep);

// Loads `path`: a checkpoint's directory, or a save_dir, whose newest
// checkpoint that reads back whole (manifest present, sizes and checksums
// right) is taken; newer ones that do not are named on stderr and
// skipped.
StatusOr<Checkpoint> LoadCheckpoint(const std::string& path);

// Whether `save_dir` holds a checkpoint directory (step-N), whole or not.
bool HoldsCheckpoint(const std::string& save_dir);

// Fails, naming the first key that differs, unless `checkpoint` was saved
// by a run of `model`.
Status CheckResumable(const Checkpoint& checkpoint,
                      const std::map<std::string, std::string>& model);

}  // namespace loom

#endif  // LOOM_RUNTIME_CHECKPOINT_H_
