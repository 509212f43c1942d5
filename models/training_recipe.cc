#include "models/training_recipe.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace loom {

std::optional<TrainingRecipe> PresetRecipe(const std::string& preset, const GptConfig& config) {
  // Peak learning rates of the GPT-3 paper's Table 2.1, by model size.
  static const std::map<std::string, float> kGpt3PeakRate = {
      {"gpt3-1.3b", 2.0e-4f}, {"gpt3-6.7b", 1.2e-4f},
      {"gpt3-13b", 1.0e-4f},  {"gpt3-175b", 0.6e-4f}};
  auto peak = kGpt3PeakRate.find(preset);
  if (peak == kGpt3PeakRate.end()) return std::nullopt;
  TrainingRecipe r;
  r.name = "gpt3";
  r.amp_level = "O2";
  r.amp_dtype = "bf16";
  OptimizerConfig& o = r.optimizer;
  o.type = "adamw";
  o.learning_rate = peak->second;
  o.beta1 = 0.9f;
  o.beta2 = 0.95f;
  o.epsilon = 1e-8f;
  o.weight_decay = 0.1f;
  o.clip_grad_norm = 1.0f;
  // Appendix B: warm-up over the first 375M tokens, cosine decay to 10%
  // of the peak over 260B tokens; steps of the given batch.
  const double tokens_per_step = static_cast<double>(config.batch_size) * config.seq_len;
  o.warmup_steps = std::max<int64_t>(1, std::llround(375e6 / tokens_per_step));
  o.lr_decay = "cosine";
  o.decay_steps = std::max<int64_t>(o.warmup_steps, std::llround(260e9 / tokens_per_step));
  o.min_learning_rate = 0.1f * o.learning_rate;
  r.micro_batch_size = 1;
  return r;
}

std::string RecipeSummary(const TrainingRecipe& r) {
  const OptimizerConfig& o = r.optimizer;
  std::string s = r.amp_level == "O0" ? std::string("fp32") : r.amp_dtype + " " + r.amp_level;
  s += StrCat(", ", o.type, " lr ", o.learning_rate);
  if (o.warmup_steps > 0) s += StrCat(" warm-up ", o.warmup_steps, " steps");
  if (o.lr_decay != "constant") {
    s += StrCat(", ", o.lr_decay, " to ", o.min_learning_rate, " at step ", o.decay_steps);
  }
  if (o.clip_grad_norm > 0) s += StrCat(", clip ", o.clip_grad_norm);
  if (r.micro_batch_size > 0) s += StrCat(", micro-batch size ", r.micro_batch_size);
  return s;
}

}  // namespace loom
