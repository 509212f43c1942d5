// Flags shared by several commands. Each flag can also be set as the
// environment variable FLAGS_<name>; a command-line value wins.
#ifndef LOOM_TOOLS_COMMON_FLAGS_H_
#define LOOM_TOOLS_COMMON_FLAGS_H_

#include <gflags/gflags.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cost_model/cluster.pb.h"
#include "cost_model/cost_context.h"
#include "executor/stream.h"
#include "framework/optimizer.h"
#include "models/gpt.h"
#include "models/synthetic_data.h"
#include "models/token_file_dataset.h"
#include "models/training_recipe.h"
#include "passes/amp.h"
#include "passes/planner.h"
#include "passes/strategy.h"
#include "runtime/training_loop.h"

DECLARE_string(preset);
DECLARE_int64(seed);
DECLARE_int64(steps);
DECLARE_int64(batch_size);
DECLARE_int64(seq_len);
DECLARE_int64(layers);
DECLARE_double(dropout);
DECLARE_string(optimizer);
DECLARE_double(lr);
DECLARE_string(config);
DECLARE_int32(dp);
DECLARE_int32(mp);
DECLARE_int32(pp);
DECLARE_int32(micro_batches);
DECLARE_string(schedule);
DECLARE_int32(vpp);
DECLARE_int32(rank);
DECLARE_string(cluster);
DECLARE_string(device);
DECLARE_string(cost_table);
DECLARE_string(program);
DECLARE_string(save_dir);
DECLARE_string(resume);

namespace loom {

// The --preset config with --batch_size, --seq_len, --layers, --vocab_size
// (256 with --text unless given), --dropout and --seed applied.
StatusOr<GptConfig> GptConfigFromFlags();
// The batches of --data or --text for a model of this vocabulary and
// sequence length, else the synthetic dataset.
StatusOr<std::shared_ptr<const Dataset>> DatasetFromFlags(int64_t vocab_size, int64_t seq_len,
                                                          int64_t seed);
inline StatusOr<std::shared_ptr<const Dataset>> DatasetFromFlags(const GptConfig& c) {
  return DatasetFromFlags(c.vocab_size, c.seq_len, c.seed);
}
// The optimizer of --optimizer, --lr and the schedule and clipping flags,
// over --preset's recipe where it has one (RecipeFromFlags).
StatusOr<OptimizerConfig> OptimizerConfigFromFlags();
// The recipe --preset trains by where flags do not say (models/
// training_recipe.h): none with --recipe none or a --program. The first
// call that finds one says so on stderr.
StatusOr<std::optional<TrainingRecipe>> RecipeFromFlags();

// The strategy of --config (defaults if empty) with --dp, --mp, --pp,
// --micro_batches, --schedule, --vpp and the pass switches applied where
// given on the command line or in the environment, then validated.
StatusOr<proto::Strategy> StrategyFromFlags();
// --amp_level and --amp_dtype alone, for serial training.
StatusOr<AmpConfig> AmpConfigFromFlags();

// The training loop of --steps, --resume, --save_dir, --save_every,
// --keep_checkpoints and --skip_nonfinite_steps.
TrainingLoopOptions TrainingLoopOptionsFromFlags();
// The training loop's lines, as loom train and loom run print them:
// "step K loss X time_ms T", and notes (resumed, saved, skipped).
void PrintStep(const StepReport& report);
void PrintNote(const std::string& note);

// The printed steps' times, summed up at the end of a run in one line:
// "steps 2-39: median step time 10.85 ms, coefficient of variation 2.1%"
// (not "step ...", which scripts read as a step's line). Steps 0 and 1 are
// left out: they allocate and warm caches.
class StepTimeSummary {
 public:
  void Add(const StepReport& report);
  // Nothing where fewer than 3 steps count.
  void Print() const;

 private:
  std::vector<double> ms_;
  int64_t first_step_ = -1, last_step_ = -1;
};

// "8 micro-batches of 128 sequences": a step's micro-batches and, where
// they divide the config's batch evenly over dp, each one's size (a count
// alone hides what a recipe or --batch_size made of it).
std::string MicroBatchesText(const GptConfig& config, int dp, int micro_batches);

// "a,b,c" as its items (one empty item for "").
std::vector<std::string> CommaList(const std::string& s);

// True if flag `name` was given on the command line or in the environment.
bool FlagGiven(const char* name);

// The device of --device.
StatusOr<DeviceType> DeviceFromFlags();

// The cluster of --cluster (a preset name or a file), validated.
StatusOr<proto::Cluster> ClusterFromFlags();
// What work costs on --cluster: its ops priced by the cost table
// (CostTablePathFromFlags; empty while that file does not exist).
StatusOr<std::unique_ptr<CostContext>> CostsFromFlags();
// The costs `loom run` plans at, into `options`: --cluster's with no
// measured entries, and the pipeline cut by FLOPs, so that a run's plan
// never depends on the cost table in the user's cache. Returns their owner.
StatusOr<std::unique_ptr<CostContext>> RunPlanningCostsFromFlags(PlanOptions* options);
// The costs `loom plan` plans at: CostsFromFlags where --cluster is given,
// the pipeline cut by them; else as `loom run` plans.
StatusOr<std::unique_ptr<CostContext>> PlanningCostsFromFlags(PlanOptions* options);
// The cap on every rank's simulated peak that planning keeps under:
// --memory_limit, else (unless --allow_oversubscribe) the memory of
// --cluster's GPU; 0: none.
StatusOr<int64_t> MemoryLimitFromFlags();
// Under MemoryLimitFromFlags (when there is one) the plan of `*strategy`
// is first simulated on --cluster (CostsFromFlags; planned at
// `options`): recomputation the strategy leaves open
// is chosen, and an overlap schedule gives up micro-batches in flight,
// until every rank fits (SimulateGptWithinMemory); `*strategy` becomes what
// fits and `*note` says why. A plan that cannot fit is an error naming the
// ranks, and what they hold.
Status FitToMemoryFromFlags(const GptConfig& config, const OptimizerConfig& optimizer,
                            proto::Strategy* strategy, std::string* note,
                            const PlanOptions& options);
// --cost_table, else the per-user default (cost_model/cost_table.h).
std::string CostTablePathFromFlags();

// Sets every defined flag whose FLAGS_<name> environment variable exists.
// Call before parsing the command line, so the command line overrides. A
// value that does not parse is an error naming the variable.
Status ApplyFlagsFromEnvironment();

}  // namespace loom

#endif  // LOOM_TOOLS_COMMON_FLAGS_H_
