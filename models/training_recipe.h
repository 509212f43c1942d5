// How a preset is trained by the people who train models of its size:
// precision, optimizer and learning-rate schedule, clipping and micro-batch
// size. The GPT-3 presets follow the GPT-3 paper (Brown et al. 2020, Table
// 2.1 and Appendix B) as Megatron-LM runs it: bf16 O2 with fp32 master
// weights, AdamW (0.9, 0.95, 1e-8) with weight decay 0.1, the paper's peak
// rate warmed up over the first 375M tokens and cosine-decayed to a tenth
// of it over 260B tokens, the global gradient norm clipped to 1.0, and
// micro-batches of one sequence per data-parallel replica.
//
// The command line takes a recipe where a flag is not given (`--recipe
// none` takes none): each field is a default, never an override.
#ifndef LOOM_MODELS_TRAINING_RECIPE_H_
#define LOOM_MODELS_TRAINING_RECIPE_H_

#include <optional>
#include <string>

#include "framework/optimizer.h"
#include "models/gpt.h"

namespace loom {

struct TrainingRecipe {
  std::string name;              // "gpt3"
  std::string amp_level = "O0";  // as AmpStrategy.level
  std::string amp_dtype = "bf16";
  // Type, peak rate, betas, epsilon, weight decay, schedule and clipping.
  OptimizerConfig optimizer;
  // Sequences per micro-batch on each data-parallel replica; 0 leaves the
  // micro-batch count alone.
  int64_t micro_batch_size = 0;
};

// The recipe of preset `preset` for `config` (the preset with the batch and
// sequence length it will train with: the schedule's steps are counted from
// the paper's tokens), or nullopt for a preset without one.
std::optional<TrainingRecipe> PresetRecipe(const std::string& preset, const GptConfig& config);

// "bf16 O2, AdamW lr 0.00012 warm-up 179 steps, cosine to 1.2e-05 at step
// 123977, clip 1, micro-batch size 1": for the line that says a recipe was
// taken.
std::string RecipeSummary(const TrainingRecipe& recipe);

}  // namespace loom

#endif  // LOOM_MODELS_TRAINING_RECIPE_H_
