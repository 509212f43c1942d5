#include "tools/common_flags.h"

#include <cstdlib>

DEFINE_string(preset, "gpt-tiny",
              "model preset: gpt-tiny, gpt-small, gpt3-1.3b, gpt3-6.7b, "
              "gpt3-13b, gpt3-175b");
DEFINE_int64(seed, 1, "seed for parameter initialization and the data");
DEFINE_int64(steps, 20, "training steps");
DEFINE_int64(batch_size, 0, "global batch size in sequences (0: preset's)");
DEFINE_int64(seq_len, 0, "sequence length (0: preset's)");
DEFINE_int64(layers, 0, "number of transformer layers (0: preset's)");
DEFINE_double(dropout, 0.0, "dropout probability");
DEFINE_string(optimizer, "adamw", "adamw or sgd");
DEFINE_double(lr, 3e-3, "learning rate");

namespace loom {

StatusOr<GptConfig> GptConfigFromFlags() {
  LOOM_ASSIGN_OR_RETURN(GptConfig c, GptPreset(FLAGS_preset));
  if (FLAGS_batch_size < 0 || FLAGS_seq_len < 0 || FLAGS_layers < 0) {
    return InvalidArgument("--batch_size, --seq_len and --layers must not be "
                           "negative");
  }
  if (FLAGS_batch_size > 0) c.batch_size = FLAGS_batch_size;
  if (FLAGS_seq_len > 0) c.seq_len = FLAGS_seq_len;
  if (FLAGS_layers > 0) c.num_layers = FLAGS_layers;
  c.dropout = static_cast<float>(FLAGS_dropout);
  c.seed = FLAGS_seed;
  LOOM_RETURN_IF_ERROR(ValidateGptConfig(c));
  return c;
}

StatusOr<OptimizerConfig> OptimizerConfigFromFlags() {
  OptimizerConfig o;
  o.type = FLAGS_optimizer;
  if (o.type != "adamw" && o.type != "sgd") {
    return InvalidArgument("--optimizer must be adamw or sgd, got '", o.type,
                           "'");
  }
  if (!(FLAGS_lr > 0)) {
    return InvalidArgument("--lr must be positive, got ", FLAGS_lr);
  }
  o.learning_rate = static_cast<float>(FLAGS_lr);
  return o;
}

void ApplyFlagsFromEnvironment() {
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  for (const auto& f : flags) {
    const char* value = std::getenv(("FLAGS_" + f.name).c_str());
    if (value != nullptr) gflags::SetCommandLineOption(f.name.c_str(), value);
  }
}

}  // namespace loom
