// The flags of the loom command line in groups, one per function of
// common_flags.h that reads them. A command's flag list (the table in
// main.cc) is the groups of the functions it calls plus flags of its own,
// so that `loom CMD --help` lists what the command reads and a flag it
// does not read is refused by name.
#ifndef LOOM_TOOLS_FLAG_GROUPS_H_
#define LOOM_TOOLS_FLAG_GROUPS_H_

#include <initializer_list>
#include <string_view>
#include <vector>

namespace loom {

using FlagGroup = std::vector<const char*>;

// GptConfigFromFlags: the model a preset builds (--text sets the vocabulary
// only where --vocab_size is not given, so it is a data flag).
inline const FlagGroup kModelFlags = {"preset", "batch_size", "seq_len", "layers",
                                      "dropout",  "seed",       "vocab_size"};
// OptimizerConfigFromFlags and RecipeFromFlags.
inline const FlagGroup kOptimizerFlags = {"optimizer", "lr",     "warmup_steps",   "lr_decay",
                                          "decay_steps", "min_lr", "clip_grad_norm", "recipe"};
// AmpConfigFromFlags: precision for serial training.
inline const FlagGroup kAmpFlags = {"amp_level", "amp_dtype", "init_loss_scale"};
// The part of StrategyFromFlags that decides the plan's layout and passes;
// with `loom run --plan` the plan file decides these.
inline const FlagGroup kLayoutFlags = {"config",
                                       "dp",
                                       "mp",
                                       "pp",
                                       "micro_batches",
                                       "schedule",
                                       "vpp",
                                       "max_in_flight",
                                       "dp_bucketing",
                                       "dp_bucket_bytes",
                                       "sharding_stage",
                                       "sharding_degree",
                                       "sharding_fetch_mode",
                                       "sharding_prefetch_depth",
                                       "sharding_keep_gathered_bytes",
                                       "mp_async_allreduce_in_backward",
                                       "op_split",
                                       "op_split_parts",
                                       "recompute",
                                       "recompute_layers",
                                       "sequence_parallel"};
// StrategyFromFlags: the layout and its precision.
inline const FlagGroup kStrategyFlags = [] {
  FlagGroup flags = kLayoutFlags;
  flags.insert(flags.end(), kAmpFlags.begin(), kAmpFlags.end());
  flags.push_back("grad_reduce_dtype");
  return flags;
}();
// DatasetFromFlags.
inline const FlagGroup kDataFlags = {"data", "data_dtype", "text"};
// TrainingLoopOptionsFromFlags.
inline const FlagGroup kTrainingLoopFlags = {"steps",         "save_dir", "save_every",
                                             "keep_checkpoints", "resume", "skip_nonfinite_steps"};
// MemoryLimitFromFlags and FitToMemoryFromFlags.
inline const FlagGroup kMemoryFlags = {"memory_limit", "allow_oversubscribe"};
// PlanOpProfileOptionsFromFlags: how `loom profile` and `loom tune
// --profile_ops` time ops.
inline const FlagGroup kOpTimingFlags = {"in_step", "profile_samples", "profile_warmup",
                                         "profile_min_sample_ms", "profile_max_bytes"};
// WaitForQuietCpuFromFlags: when a measurement starts. Apart from the
// timing flags, as it is a standing setting (often FLAGS_ in the
// environment) that a command which measures nothing ignores.
inline const FlagGroup kQuietWaitFlags = {"wait_for_quiet_seconds"};

// What a program file fixes (loom train and loom run --program): the model
// and its optimizer. Its --seed still seeds the data and dropout.
inline const FlagGroup kFixedByProgramFlags = {"preset",     "batch_size", "seq_len",   "layers",
                                               "dropout",    "vocab_size", "optimizer", "lr"};

// `groups` then `own`, each flag once, in that order.
inline FlagGroup FlagsOf(std::initializer_list<const FlagGroup*> groups,
                         std::initializer_list<const char*> own) {
  FlagGroup flags;
  auto add = [&flags](const char* name) {
    for (const char* have : flags) {
      if (std::string_view(have) == name) return;
    }
    flags.push_back(name);
  };
  for (const FlagGroup* group : groups) {
    for (const char* name : *group) add(name);
  }
  for (const char* name : own) add(name);
  return flags;
}

}  // namespace loom

#endif  // LOOM_TOOLS_FLAG_GROUPS_H_
