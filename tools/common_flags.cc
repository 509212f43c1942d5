#include "tools/common_flags.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "cost_model/cluster.h"
#include "cost_model/cost_table.h"
#include "framework/lr_schedule.h"
#include "framework/median.h"
#include "models/training_recipe.h"
#include "passes/amp.h"
#include "runtime/simulation.h"
#include "scheduler/schedule.h"

DEFINE_string(preset, "gpt-tiny",
              "model preset: gpt-tiny, gpt-small, gpt3-1.3b, gpt3-6.7b, gpt3-13b, gpt3-175b "
              "(GPT-3's sizes), gpt-22b, gpt-530b, gpt-1t (Korthikanti et al. 2022's)");
DEFINE_int64(seed, 1, "seed for parameter initialization and the data");
DEFINE_int64(steps, 20, "training steps");
DEFINE_int64(batch_size, 0, "global batch size in sequences (0: preset's)");
DEFINE_int64(seq_len, 0, "sequence length (0: preset's)");
DEFINE_int64(layers, 0, "number of transformer layers (0: preset's)");
DEFINE_double(dropout, 0.0, "dropout probability");
DEFINE_string(optimizer, "adamw", "adamw or sgd");
DEFINE_string(amp_level, "",
              "mixed precision: O0 (fp32), O1 (GEMMs in --amp_dtype) or O2 (every op but the "
              "loss); parameters stay fp32 master weights (default: the config's, else O0)");
DEFINE_string(amp_dtype, "", "bf16 or fp16 (default: the config's, else bf16)");
DEFINE_double(init_loss_scale, 0,
              "fp16: the first dynamic loss scale; it halves on each step whose gradients "
              "overflow (that step is skipped) and doubles after 2000 good ones (0: the "
              "config's, else 65536)");
DEFINE_string(grad_reduce_dtype, "",
              "the dtype data-parallel all-reduces and ZeRO reduce-scatters move fp32 "
              "gradients in: fp32, or --amp_dtype for half the bytes (default: the "
              "config's, else fp32)");
DEFINE_double(lr, 3e-3, "learning rate: the peak, where a schedule warms up or decays");
DEFINE_int64(warmup_steps, 0, "learning-rate warm-up: steps rising linearly to --lr");
DEFINE_string(lr_decay, "constant",
              "after the warm-up: constant, linear or cosine decay to --min_lr");
DEFINE_int64(decay_steps, 0,
             "steps from the start to the end of the decay, warm-up included (0: --steps)");
DEFINE_double(min_lr, 0, "the learning rate a decay ends at");
DEFINE_double(clip_grad_norm, 0,
              "clip the global gradient norm to this before each update (Megatron's "
              "--clip-grad; 1.0 is the usual value); 0: no clipping");
DEFINE_string(recipe, "preset",
              "how a --preset trains where no flag (or --config field) says otherwise: "
              "'preset', its own recipe (the GPT-3 presets: bf16 O2, AdamW (0.9, 0.95) with "
              "weight decay 0.1, the GPT-3 paper's peak rate warmed up over 375M tokens and "
              "cosine-decayed to a tenth over 260B, clip 1.0, micro-batches of one sequence "
              "per dp replica, as Megatron-LM trains them; the others have none), or 'none': "
              "the flags' own defaults (fp32, a constant rate, no clipping)");
DEFINE_string(save_dir, "",
              "write checkpoints here (step-N/: model.safetensors, optimizer.safetensors, "
              "manifest.json); every --save_every steps and after the last");
DEFINE_int64(save_every, 0, "steps between checkpoints (0: only after the last step)");
DEFINE_int32(keep_checkpoints, 3, "checkpoints kept in --save_dir (the newest)");
DEFINE_string(resume, "",
              "resume from this checkpoint, or from the newest complete one in this --save_dir; "
              "--steps counts the whole run");
DEFINE_bool(skip_nonfinite_steps, false,
            "undo and skip a step whose loss is not finite instead of stopping (costs a copy of "
            "the parameters and optimizer state every step)");
DEFINE_string(program, "",
              "a program file to use instead of --preset's model (loom model, loom opt, or "
              "written by hand): loom train trains it (--startup initializes it), loom profile "
              "times its ops");
DEFINE_string(data, "",
              "train on this token file (a flat array of little-endian ids, as nanoGPT's "
              "prepare scripts and Megatron's raw datasets write; see --data_dtype) instead of "
              "the synthetic dataset");
DEFINE_string(data_dtype, "uint16", "the ids of --data: uint16 or uint32");
DEFINE_string(text, "",
              "train on this file read as bytes (vocabulary 256), e.g. "
              "/usr/share/common-licenses/GPL-3");
DEFINE_int64(vocab_size, 0, "vocabulary size (0: the preset's, or 256 with --text)");
DEFINE_string(config, "", "strategy file (text-format loom.proto.Strategy, see configs/)");
DEFINE_int32(dp, 0, "data-parallel degree (0: the config's)");
DEFINE_int32(mp, 0, "tensor-parallel degree (0: the config's)");
DEFINE_int32(pp, 0, "pipeline stages (0: the config's)");
DEFINE_int32(micro_batches, 0, "pipeline micro-batches per step (0: the config's)");
DEFINE_string(schedule, "",
              "pipeline schedule: FThenB, 1F1B, Eager1F1B, VPP, ZBH1, 1F1B-overlap, ZBV (empty: "
              "the config's)");
DEFINE_int32(vpp, 0, "model chunks per stage for VPP (0: the config's; ZBV: 2)");
DEFINE_int64(memory_limit, 0,
             "a hard cap (bytes) on every rank's simulated peak memory: where the strategy "
             "leaves recomputation open, the least that fits (none, selective, then full over "
             "the fewest layers); 1F1B-overlap gives up overlap (fewer micro-batches in flight, "
             "or none interleaved: 1F1B) until the plan fits, takes the fastest that does; "
             "ZeRO stage 3 keeps as many buckets whole for the step as fit; each says so. 0: "
             "none (loom plan and run: the memory of --cluster's GPU, unless "
             "--allow_oversubscribe)");
DEFINE_bool(allow_oversubscribe, false,
            "plan and run even where a rank's simulated peak exceeds its GPU's memory (without "
            "it, and without --memory_limit, the GPU's memory is the limit: recomputation is "
            "chosen to fit, and a plan that cannot fit is refused)");
DEFINE_int32(max_in_flight, 0,
             "1F1B-overlap: at most this many micro-batches in flight per stage (0: the "
             "config's, else the schedule's own)");
DEFINE_int32(rank, 0, "the rank whose program a pass pipeline rewrites");
DEFINE_bool(dp_bucketing, true, "optional pass switch: bucket data-parallel gradient all-reduces");
DEFINE_int64(dp_bucket_bytes, 0,
             "data-parallel gradient bucket size in bytes (0: the config's, else the smallest at "
             "which the cluster's all-reduce reaches 90% of link bandwidth, at most a quarter "
             "of the gradients; --explain says which)");
DEFINE_int32(sharding_stage, 0,
             "ZeRO stage over the data-parallel group: 1 shards the optimizer state, 2 the "
             "gradients too (each dp rank updates 1/dp of every gradient bucket), 3 the "
             "parameters too (gathered before each use); 0: the config's");
DEFINE_int32(sharding_degree, 0, "ranks sharing the state (0: the config's, else dp.degree)");
DEFINE_string(sharding_fetch_mode, "",
              "how parameters are made whole after a sharded update: all_gather, all_reduce or "
              "auto (the cost model's pick per bucket; empty: the config's)");
DEFINE_int32(sharding_prefetch_depth, -1,
             "stage 3: buckets whose gathers run ahead of the one being read (0: none; -1: the "
             "config's)");
DEFINE_int64(sharding_keep_gathered_bytes, 0,
             "stage 3: bytes of buckets kept whole for the step instead of gathered again in "
             "every micro-batch (-1: all; 0: the config's, else none; --memory_limit keeps the "
             "most that fits); under AMP a bucket of weight matrices kept whole is gathered in "
             "bf16 in the step's first micro-batch");
DEFINE_bool(mp_async_allreduce_in_backward, true,
            "pass switch: in the tensor-parallel backward, issue the input gradient's all-reduce "
            "before the weight gradient's GEMM so that they overlap (Paddle's flag of this name)");
DEFINE_bool(op_split, false,
            "pass switch: split forward matmuls into row parts, each with its own tensor-parallel "
            "all-reduce, where the cluster's cost model says the overlap pays (numbers unchanged)");
DEFINE_int32(op_split_parts, 0,
             "with --op_split: split every candidate into this many parts (0: as the cost "
             "model chooses)");
DEFINE_string(recompute, "",
              "activation recomputation: none, full (every layer's forward runs again in its "
              "backward; only its input is kept) or selective (the attention core only); "
              "empty: the config's");
DEFINE_int32(recompute_layers, 0,
             "with --recompute: only the first this many layers of each stage's chunk (0: the "
             "config's, else every layer)");
DEFINE_bool(sequence_parallel, false,
            "Megatron sequence parallelism over the tensor-parallel ranks (needs --mp > 1): layer "
            "norms, dropouts and residual adds hold 1/mp of the sequence; all-gathers and "
            "reduce-scatters replace the all-reduces");
DEFINE_string(device, "cpu",
              "where the ranks run: cpu, or cuda (a GPU per rank, NCCL between them; "
              "needs a build with the CUDA backend and a device)");
DEFINE_string(cluster, "local",
              "cluster description: a preset (local, emulated, a100, h100) "
              "or a text-format loom.proto.Cluster file");
DEFINE_string(cost_table, "",
              "op cost table file (empty: $LOOM_COST_TABLE, else "
              "$XDG_CACHE_HOME/loom/cost_table.pbtxt or "
              "~/.cache/loom/cost_table.pbtxt)");


namespace loom {

StatusOr<GptConfig> GptConfigFromFlags() {
  LOOM_ASSIGN_OR_RETURN(GptConfig c, GptPreset(FLAGS_preset));
  if (FLAGS_batch_size < 0 || FLAGS_seq_len < 0 || FLAGS_layers < 0 || FLAGS_vocab_size < 0) {
    return InvalidArgument("--batch_size, --seq_len, --layers and --vocab_size must not be "
                           "negative");
  }
  if (FLAGS_vocab_size > 0) {
    c.vocab_size = FLAGS_vocab_size;
  } else if (!FLAGS_text.empty()) {
    c.vocab_size = 256;
  }
  if (FLAGS_batch_size > 0) c.batch_size = FLAGS_batch_size;
  if (FLAGS_seq_len > 0) c.seq_len = FLAGS_seq_len;
  if (FLAGS_layers > 0) c.num_layers = FLAGS_layers;
  c.dropout = static_cast<float>(FLAGS_dropout);
  c.seed = FLAGS_seed;
  LOOM_RETURN_IF_ERROR(ValidateGptConfig(c));
  return c;
}

StatusOr<std::shared_ptr<const Dataset>> DatasetFromFlags(int64_t vocab_size, int64_t seq_len,
                                                          int64_t seed) {
  if (!FLAGS_data.empty() && !FLAGS_text.empty()) {
    return InvalidArgument("--data and --text name two datasets; give one");
  }
  if (FLAGS_data.empty() && FLAGS_text.empty()) {
    return std::shared_ptr<const Dataset>(
        std::make_shared<SyntheticDataset>(vocab_size, seq_len, seed));
  }
  TokenFileDataset::Width width = TokenFileDataset::Width::kByte;
  if (!FLAGS_data.empty()) {
    auto w = TokenWidthFromName(FLAGS_data_dtype);
    if (!w.ok() || *w == TokenFileDataset::Width::kByte) {
      return InvalidArgument("--data_dtype must be uint16 or uint32, got '", FLAGS_data_dtype, "'");
    }
    width = *w;
  }
  const std::string& path = FLAGS_data.empty() ? FLAGS_text : FLAGS_data;
  auto data = TokenFileDataset::Open(path, width, seq_len, vocab_size, seed);
  if (!data.ok()) return data.status().WithContext(FLAGS_data.empty() ? "--text" : "--data");
  return std::shared_ptr<const Dataset>(std::move(*data));
}

StatusOr<std::optional<TrainingRecipe>> RecipeFromFlags() {
  if (FLAGS_recipe == "none" || !FLAGS_program.empty()) return std::optional<TrainingRecipe>();
  if (FLAGS_recipe != "preset") {
    return InvalidArgument("--recipe must be preset or none, got '", FLAGS_recipe, "'");
  }
  LOOM_ASSIGN_OR_RETURN(const GptConfig config, GptConfigFromFlags());
  std::optional<TrainingRecipe> recipe = PresetRecipe(FLAGS_preset, config);
  static bool said = false;  // once per process, however many callers ask
  if (recipe && !said) {
    said = true;
    std::fprintf(stderr, "loom: %s trains by the %s recipe where flags do not say: %s "
                 "(--recipe none: without it)\n",
                 FLAGS_preset.c_str(), recipe->name.c_str(), RecipeSummary(*recipe).c_str());
  }
  return recipe;
}

StatusOr<OptimizerConfig> OptimizerConfigFromFlags() {
  LOOM_ASSIGN_OR_RETURN(const std::optional<TrainingRecipe> recipe, RecipeFromFlags());
  // A recipe's field stands where its flag was not given.
  auto flag = [&](const char* name) { return !recipe || FlagGiven(name); };
  OptimizerConfig o = recipe ? recipe->optimizer : OptimizerConfig();
  if (flag("optimizer")) o.type = FLAGS_optimizer;
  if (o.type != "adamw" && o.type != "sgd") {
    return InvalidArgument("--optimizer must be adamw or sgd, got '", o.type,
                           "'");
  }
  if (!(FLAGS_lr > 0) || !std::isfinite(FLAGS_lr)) {
    return InvalidArgument("--lr must be positive and finite, got ", FLAGS_lr);
  }
  if (flag("lr")) {
    // A recipe's floor is a fraction of its peak: it follows a given peak.
    if (recipe) o.min_learning_rate *= static_cast<float>(FLAGS_lr) / o.learning_rate;
    o.learning_rate = static_cast<float>(FLAGS_lr);
  }
  if (!(FLAGS_clip_grad_norm >= 0) || !std::isfinite(FLAGS_clip_grad_norm)) {
    return InvalidArgument("--clip_grad_norm must be a norm >= 0 (0: no clipping), got ",
                           FLAGS_clip_grad_norm);
  }
  if (flag("clip_grad_norm")) o.clip_grad_norm = static_cast<float>(FLAGS_clip_grad_norm);
  if (FLAGS_warmup_steps < 0) {
    return InvalidArgument("--warmup_steps must not be negative, got ", FLAGS_warmup_steps);
  }
  LOOM_RETURN_IF_ERROR(ParseLrDecay(FLAGS_lr_decay).status().WithContext("--lr_decay"));
  if (flag("warmup_steps")) o.warmup_steps = FLAGS_warmup_steps;
  if (flag("lr_decay")) o.lr_decay = FLAGS_lr_decay;
  if (flag("decay_steps")) o.decay_steps = FLAGS_decay_steps > 0 ? FLAGS_decay_steps : FLAGS_steps;
  if (flag("min_lr")) o.min_learning_rate = static_cast<float>(FLAGS_min_lr);
  if (!(o.min_learning_rate >= 0) || o.min_learning_rate > o.learning_rate) {
    return InvalidArgument("--min_lr must lie in [0, --lr = ", o.learning_rate, "], got ",
                           o.min_learning_rate);
  }
  if (o.lr_decay != "constant" && o.decay_steps < o.warmup_steps) {
    return InvalidArgument("--decay_steps (", o.decay_steps, ") ends before --warmup_steps (",
                           o.warmup_steps, "); it counts the warm-up too");
  }
  return o;
}

namespace {

// The amp flags over the strategy's amp section (each left alone unset).
// A flag that would change nothing at the level and dtype it ends up with
// is a mistake, not a no-op.
Status SetAmpFromFlags(proto::AmpStrategy* amp) {
  LOOM_ASSIGN_OR_RETURN(const std::optional<TrainingRecipe> recipe, RecipeFromFlags());
  if (recipe && FLAGS_amp_level.empty() && !amp->has_level()) {
    amp->set_level(recipe->amp_level);
    if (!amp->has_dtype()) amp->set_dtype(recipe->amp_dtype);
  }
  if (!FLAGS_amp_level.empty()) amp->set_level(FLAGS_amp_level);
  if (!FLAGS_amp_dtype.empty()) amp->set_dtype(FLAGS_amp_dtype);
  if (FLAGS_init_loss_scale != 0) amp->set_init_loss_scale(static_cast<float>(FLAGS_init_loss_scale));
  if (!FLAGS_grad_reduce_dtype.empty()) amp->set_grad_reduce_dtype(FLAGS_grad_reduce_dtype);
  if (!FLAGS_amp_dtype.empty() && amp->level() == "O0") {
    return InvalidArgument("--amp_dtype ", FLAGS_amp_dtype,
                           " does nothing at amp level O0: add --amp_level O1 or O2");
  }
  if (FLAGS_init_loss_scale != 0 && (amp->level() == "O0" || amp->dtype() != "fp16")) {
    return InvalidArgument("--init_loss_scale applies to fp16 training only (--amp_level O1|O2 "
                           "--amp_dtype fp16)");
  }
  return Status::OK();
}

// The recipe's micro-batch size, where neither --micro_batches nor the
// config gives a count: each dp replica's share of the batch in
// micro-batches of that many sequences.
Status SetMicroBatchesFromRecipe(proto::Strategy* s) {
  LOOM_ASSIGN_OR_RETURN(const std::optional<TrainingRecipe> recipe, RecipeFromFlags());
  if (!recipe || recipe->micro_batch_size <= 0 || FlagGiven("micro_batches") ||
      s->pipeline().has_micro_batches()) {
    return Status::OK();
  }
  LOOM_ASSIGN_OR_RETURN(const GptConfig config, GptConfigFromFlags());
  const int64_t per_step = std::max<int64_t>(1, s->dp().degree()) * recipe->micro_batch_size;
  if (config.batch_size % per_step != 0) {
    return InvalidArgument("the ", recipe->name, " recipe's micro-batch size ",
                           recipe->micro_batch_size, " does not divide the batch of ",
                           config.batch_size, " over dp=", s->dp().degree(),
                           "; give --micro_batches, or --recipe none");
  }
  s->mutable_pipeline()->set_micro_batches(static_cast<int32_t>(config.batch_size / per_step));
  return Status::OK();
}

}  // namespace

StatusOr<AmpConfig> AmpConfigFromFlags() {
  proto::Strategy s;
  LOOM_RETURN_IF_ERROR(SetAmpFromFlags(s.mutable_amp()));
  auto amp = AmpConfigOf(s);
  if (!amp.ok()) {
    return amp.status().WithContext(
        "--amp_level/--amp_dtype/--init_loss_scale/--grad_reduce_dtype");
  }
  return amp;
}

StatusOr<proto::Strategy> StrategyFromFlags() {
  // 0 means "the config's"; below it is a mistake, not a default.
  for (const auto& [name, value] :
       {std::make_pair("dp", FLAGS_dp), std::make_pair("mp", FLAGS_mp),
        std::make_pair("pp", FLAGS_pp), std::make_pair("micro_batches", FLAGS_micro_batches),
        std::make_pair("vpp", FLAGS_vpp), std::make_pair("max_in_flight", FLAGS_max_in_flight)}) {
    if (value < 0) {
      return InvalidArgument("--", name, " must be positive (0: the config's), got ", value);
    }
  }
  proto::Strategy s;
  if (!FLAGS_config.empty()) {
    LOOM_ASSIGN_OR_RETURN(s, LoadStrategy(FLAGS_config));
  }
  if (FLAGS_dp > 0) s.mutable_dp()->set_degree(FLAGS_dp);
  if (FLAGS_mp > 0) s.mutable_mp()->set_degree(FLAGS_mp);
  if (FLAGS_pp > 0) {
    s.mutable_pipeline()->set_degree(FLAGS_pp);
    if (FLAGS_pp > 1) s.mutable_pipeline()->set_enable(true);
  }
  if (FLAGS_micro_batches > 0) {
    s.mutable_pipeline()->set_micro_batches(FLAGS_micro_batches);
  }
  if (!FLAGS_schedule.empty()) s.mutable_pipeline()->set_schedule_mode(FLAGS_schedule);
  LOOM_RETURN_IF_ERROR(SetAmpFromFlags(s.mutable_amp()));
  if (FLAGS_vpp > 0) s.mutable_pipeline()->set_vpp_degree(FLAGS_vpp);
  // A V has two chunks a stage and no other count: --schedule ZBV alone says
  // it all (an explicit --vpp still wins, and is checked).
  if (FLAGS_vpp == 0) {
    const StatusOr<const ScheduleInfo*> schedule = FindSchedule(s.pipeline().schedule_mode());
    if (schedule.ok() && (*schedule)->v_shape) s.mutable_pipeline()->set_vpp_degree(2);
  }
  if (FLAGS_max_in_flight != 0) s.mutable_pipeline()->set_max_in_flight(FLAGS_max_in_flight);
  if (FLAGS_dp_bucket_bytes < 0) {
    return InvalidArgument("--dp_bucket_bytes must be positive (0: the config's or the cost "
                           "model's), got ", FLAGS_dp_bucket_bytes);
  }
  if (FLAGS_dp_bucket_bytes > 0) s.mutable_dp()->set_bucket_size_bytes(FLAGS_dp_bucket_bytes);
  if (FLAGS_sharding_stage != 0) s.mutable_sharding()->set_stage(FLAGS_sharding_stage);
  if (FLAGS_sharding_degree != 0) s.mutable_sharding()->set_degree(FLAGS_sharding_degree);
  if (!FLAGS_sharding_fetch_mode.empty()) {
    s.mutable_sharding()->set_fetch_mode(FLAGS_sharding_fetch_mode);
  }
  if (FLAGS_sharding_keep_gathered_bytes != 0) {
    s.mutable_sharding()->set_keep_gathered_bytes(FLAGS_sharding_keep_gathered_bytes);
  }
  if (FLAGS_sharding_prefetch_depth >= 0) {
    s.mutable_sharding()->set_prefetch_depth(FLAGS_sharding_prefetch_depth);
  }
  // A switch overrides the config only when it was given explicitly.
  if (FlagGiven("dp_bucketing")) s.mutable_passes()->set_dp_bucketing(FLAGS_dp_bucketing);
  if (FlagGiven("mp_async_allreduce_in_backward")) {
    s.mutable_passes()->set_mp_async_allreduce_in_backward(FLAGS_mp_async_allreduce_in_backward);
  }
  if (FlagGiven("op_split")) s.mutable_passes()->set_op_split(FLAGS_op_split);
  if (FlagGiven("op_split_parts")) s.mutable_passes()->set_op_split_parts(FLAGS_op_split_parts);
  if (!FLAGS_recompute.empty()) s.mutable_recompute()->set_granularity(FLAGS_recompute);
  if (FlagGiven("recompute_layers")) s.mutable_recompute()->set_num_layers(FLAGS_recompute_layers);
  if (FlagGiven("sequence_parallel")) s.mutable_mp()->set_sequence_parallel(FLAGS_sequence_parallel);
  LOOM_RETURN_IF_ERROR(SetMicroBatchesFromRecipe(&s));
  LOOM_RETURN_IF_ERROR(ValidateStrategy(s));
  return s;
}

TrainingLoopOptions TrainingLoopOptionsFromFlags() {
  TrainingLoopOptions o;
  o.steps = FLAGS_steps;
  o.resume = FLAGS_resume;
  o.save_dir = FLAGS_save_dir;
  o.save_every = FLAGS_save_every;
  o.keep = FLAGS_keep_checkpoints;
  o.skip_nonfinite = FLAGS_skip_nonfinite_steps;
  return o;
}

void PrintStep(const StepReport& r) {
  std::printf("step %lld loss %.6f", static_cast<long long>(r.step), r.loss);
  if (!std::isnan(r.learning_rate)) std::printf(" lr %.6g", r.learning_rate);
  if (!std::isnan(r.grad_norm)) std::printf(" grad_norm %.6g", r.grad_norm);
  std::printf(" time_ms %.3f\n", r.ms);
  std::fflush(stdout);
}

void StepTimeSummary::Add(const StepReport& report) {
  if (report.step < 2) return;
  if (first_step_ < 0) first_step_ = report.step;
  last_step_ = report.step;
  ms_.push_back(report.ms);
}

void StepTimeSummary::Print() const {
  if (ms_.size() < 3) return;
  std::printf("steps %lld-%lld: median step time %.2f ms, coefficient of variation %.1f%%\n",
              static_cast<long long>(first_step_), static_cast<long long>(last_step_), Median(ms_),
              100 * CoefficientOfVariation(ms_));
  std::fflush(stdout);
}

void PrintNote(const std::string& note) {
  std::printf("%s\n", note.c_str());
  std::fflush(stdout);
}

std::string MicroBatchesText(const GptConfig& config, int dp, int micro_batches) {
  std::string s = StrCat(micro_batches, micro_batches == 1 ? " micro-batch" : " micro-batches");
  const int64_t per_step = static_cast<int64_t>(std::max(1, dp)) * micro_batches;
  if (per_step <= 0 || config.batch_size % per_step != 0) return s;
  const int64_t size = config.batch_size / per_step;
  return StrCat(s, " of ", size, size == 1 ? " sequence" : " sequences");
}

std::vector<std::string> CommaList(const std::string& s) {
  std::vector<std::string> out;
  size_t from = 0;
  for (size_t at; (at = s.find(',', from)) != std::string::npos; from = at + 1) {
    out.push_back(s.substr(from, at - from));
  }
  out.push_back(s.substr(from));
  return out;
}

bool FlagGiven(const char* name) {
  gflags::CommandLineFlagInfo info;
  return gflags::GetCommandLineFlagInfo(name, &info) && !info.is_default;
}


StatusOr<proto::Cluster> ClusterFromFlags() {
  auto c = LoadCluster(FLAGS_cluster);
  if (!c.ok()) return c.status().WithContext("--cluster");
  return c;
}

std::string CostTablePathFromFlags() { return CostTablePath(FLAGS_cost_table); }

StatusOr<std::unique_ptr<CostContext>> CostsFromFlags() {
  LOOM_ASSIGN_OR_RETURN(proto::Cluster cluster, ClusterFromFlags());
  LOOM_ASSIGN_OR_RETURN(CostTable table, CostTable::LoadOrEmpty(CostTablePathFromFlags()));
  return std::make_unique<CostContext>(std::move(cluster), std::move(table));
}

StatusOr<std::unique_ptr<CostContext>> RunPlanningCostsFromFlags(PlanOptions* options) {
  LOOM_ASSIGN_OR_RETURN(proto::Cluster cluster, ClusterFromFlags());
  auto costs = std::make_unique<CostContext>(std::move(cluster), CostTable());
  options->costs = costs.get();
  options->cut_by_flops = true;
  return costs;
}

StatusOr<std::unique_ptr<CostContext>> PlanningCostsFromFlags(PlanOptions* options) {
  if (!FlagGiven("cluster")) return RunPlanningCostsFromFlags(options);
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CostContext> costs, CostsFromFlags());
  options->costs = costs.get();
  options->cut_by_flops = false;
  return costs;
}

StatusOr<int64_t> MemoryLimitFromFlags() {
  if (FLAGS_memory_limit < 0) return InvalidArgument("--memory_limit must be positive, or 0");
  if (FLAGS_memory_limit > 0 || FLAGS_allow_oversubscribe || !FlagGiven("cluster")) {
    return FLAGS_memory_limit;
  }
  LOOM_ASSIGN_OR_RETURN(proto::Cluster cluster, ClusterFromFlags());
  return DeviceMemoryLimit(cluster);
}

Status FitToMemoryFromFlags(const GptConfig& config, const OptimizerConfig& optimizer,
                            proto::Strategy* strategy, std::string* note,
                            const PlanOptions& options) {
  LOOM_ASSIGN_OR_RETURN(const int64_t limit, MemoryLimitFromFlags());
  if (limit == 0) return Status::OK();
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CostContext> costs, CostsFromFlags());
  const proto::Cluster& cluster = costs->cluster();
  const TimerFactory timer = CostModelTimers(*costs);
  StatusOr<GptSimulation> fits =
      SimulateGptWithinMemory(config, optimizer, *strategy, timer, limit, note, strategy, {},
                              options);
  if (!fits.ok()) {
    return fits.status().WithContext(
        FLAGS_memory_limit > 0 ? std::string("--memory_limit")
                               : StrCat("the device memory of cluster '", cluster.name(),
                                        "' (--allow_oversubscribe plans it anyway)"));
  }
  *note += StrCat(" (simulated on cluster '", cluster.name(), "')");
  return Status::OK();
}

Status ApplyFlagsFromEnvironment() {
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  for (const auto& f : flags) {
    const std::string var = "FLAGS_" + f.name;
    const char* value = std::getenv(var.c_str());
    if (value == nullptr) continue;
    // gflags answers an empty string when the value does not parse.
    if (gflags::SetCommandLineOption(f.name.c_str(), value).empty()) {
      return InvalidArgument("environment variable ", var, "='", value, "' is not a valid ",
                             f.type, " for --", f.name);
    }
  }
  return Status::OK();
}

StatusOr<DeviceType> DeviceFromFlags() {
  StatusOr<DeviceType> device = ParseDeviceType(FLAGS_device);
  if (!device.ok()) return device.status().WithContext("--device");
  return device;
}

}  // namespace loom
