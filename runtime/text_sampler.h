// Samples text from a GPT's parameters, to show what training taught it:
// the model's forward program at batch 1 in a scope of its own, run once
// per new token over the last seq_len tokens.
#ifndef LOOM_RUNTIME_TEXT_SAMPLER_H_
#define LOOM_RUNTIME_TEXT_SAMPLER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "executor/serial_executor.h"
#include "models/gpt.h"

namespace loom {

class TextSampler {
 public:
  // For models of `config` (its batch size and dropout aside).
  static StatusOr<std::unique_ptr<TextSampler>> Create(const GptConfig& config);

  // Takes the parameters to sample from: full tensors by name, as
  // Trainer::State() and checkpoints hold them.
  Status SetParameters(const std::map<std::string, Tensor>& parameters);

  // `prompt` continued by `count` tokens, each drawn from the softmax of
  // the logits divided by `temperature` (0: the likeliest token) with a
  // draw keyed by (seed, position): the same call gives the same text.
  StatusOr<std::vector<int64_t>> Continue(const std::vector<int64_t>& prompt, int count,
                                          float temperature, uint64_t seed);

 private:
  TextSampler() = default;

  GptConfig config_;
  Program main_, startup_;
  Scope scope_;
  std::unique_ptr<SerialExecutor> forward_;
};

// Bytes as printable text: newlines kept, other control and non-ASCII
// bytes shown as '.'.
std::string PrintableBytes(const std::vector<int64_t>& tokens);

}  // namespace loom

#endif  // LOOM_RUNTIME_TEXT_SAMPLER_H_
