// A GPT decoder as a Loom training program: token and position embeddings,
// N pre-LayerNorm blocks (causal self-attention, GELU MLP), a final layer
// norm, an LM head and a mean cross-entropy loss; then autodiff and the
// optimizer. Parameters are initialized by a separate startup program.
#ifndef LOOM_MODELS_GPT_H_
#define LOOM_MODELS_GPT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "framework/autodiff.h"
#include "framework/optimizer.h"
#include "framework/program.h"

namespace loom {

struct GptConfig {
  std::string name = "custom";
  int64_t vocab_size = 128;
  int64_t seq_len = 32;
  int64_t hidden = 64;
  int64_t num_layers = 2;
  int64_t num_heads = 4;
  int64_t ffn_hidden = 256;  // 4 * hidden in every preset
  int64_t batch_size = 8;  // the global batch, in sequences
  float dropout = 0.0f;
  float init_std = 0.02f;
  // The LM head reuses the token embedding (as GPT-2/3 do); the published
  // parameter counts assume it.
  bool tie_embeddings = true;
  int64_t seed = 1;

  int64_t head_dim() const { return hidden / num_heads; }
  // Counted from the config, not from a built program.
  int64_t NumParameters() const;
  // One transformer layer's: its two layer norms, attention and MLP.
  int64_t ParametersPerLayer() const;
  // The model FLOPs of one training step (forward and backward of
  // batch_size sequences, no recomputation; multiply-add = 2): the GEMMs,
  // the attention's score and context products over the whole sequence
  // and the head, as Narayanan et al. 2021 count them, for MFU.
  double TrainingFlopsPerStep() const;
};

// Presets: gpt-tiny, gpt-small, gpt3-1.3b, gpt3-6.7b, gpt3-13b, gpt3-175b.
StatusOr<GptConfig> GptPreset(const std::string& name);
std::vector<std::string> GptPresetNames();
// Rejects sizes that cannot build (heads not dividing hidden, ...), naming
// the field.
// The most elements a model's largest tensor may have.
inline constexpr double kMaxTensorElements = 1e15;
Status ValidateGptConfig(const GptConfig& config);
// "batch_size (8), seq_len (32) or num_layers (2)": what to lower when a
// run does not fit, for error messages.
std::string ModelSizeFields(const GptConfig& config);

// The config's fields (all but `name`) as text, keyed by field name
// ("seq_len" -> "32"), for artifacts that must rebuild the same model and
// data feed: a saved plan records them.
std::map<std::string, std::string> GptConfigToMap(const GptConfig& config);
// The inverse, validated. Every field must be present; errors name the key
// ("model config: seq_len: 'x' is not an integer").
StatusOr<GptConfig> GptConfigFromMap(const std::string& name,
                                     const std::map<std::string, std::string>& map);

inline constexpr const char* kTokensVar = "tokens";
inline constexpr const char* kLabelsVar = "labels";
inline constexpr const char* kLossVar = "loss";

struct TrainingProgram {
  GptConfig config;
  Program startup;  // initializes parameters and optimizer state
  Program main;     // forward, backward, optimizer
  std::vector<ParamGradPair> param_grads;
};

// Forward only: appends the model to `main` (and initializers to
// `startup`); the loss is kLossVar.
Status BuildGptForward(const GptConfig& config, Program& main,
                       Program& startup);

// Forward, AppendBackward and AppendOptimizer.
StatusOr<TrainingProgram> BuildGptTrainingProgram(
    const GptConfig& config, const OptimizerConfig& optimizer = {});

}  // namespace loom

#endif  // LOOM_MODELS_GPT_H_
