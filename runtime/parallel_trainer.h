// Training under a parallel plan: verifies the whole plan, lowers it to an
// ExecutionGraph, and runs this process's ranks, each with its own
// RankExecutor (one thread per stream) and communicators. The plan is made
// from a strategy, or given (a saved plan). By default every rank runs in
// this process and the ranks meet in an in-process store; with
// `local_ranks` and a file store, each process of a launch runs its own.
#ifndef LOOM_RUNTIME_PARALLEL_TRAINER_H_
#define LOOM_RUNTIME_PARALLEL_TRAINER_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "executor/comm/comm_world.h"
#include "executor/rank_executor.h"
#include "framework/grad_clip.h"
#include "models/gpt.h"
#include "models/synthetic_data.h"
#include "passes/planner.h"
#include "runtime/sharded_state.h"
#include "runtime/trainer.h"
#include "scheduler/execution_graph.h"

namespace loom {

struct StateHolder;  // runtime/training_state.h

class ParallelTrainer : public Trainer {
 public:
  struct Options {
    // How the ranks meet: timeouts (which bound how long a rank waits for a
    // failed peer), and the store.
    CommWorldOptions comm;
    // The ranks this process runs; empty: all of them.
    std::vector<int> local_ranks;
    // Where processes hand their ranks' shards to rank 0's for a
    // checkpoint: a directory every process sees and no other run writes;
    // empty: comm.file_store_dir (loom launch's store, one machine's).
    std::string handover_dir;
    // Record every executed instruction (TakeTrace).
    bool trace = false;
    // Time each rank's kernels, for LastComputeSeconds (stragglers).
    bool time_kernels = false;
    // No communicators: every communication op runs its local part alone
    // (MakeLocalCommKernels) and the loss is not averaged over replicas.
    // The losses are not training's; for timing one rank's ops in the
    // context of its step (`loom profile`).
    bool local_communication = false;
    // Communication streams outrank calc on the CPU (calc threads at nice
    // 5, waiting communication threads block instead of yielding), where
    // every rank of the host can have a core. Unset: on for plans that run
    // communication under compute (an overlap schedule, op-split, or a
    // pipeline's sends), off for the others: a ready transfer no longer
    // waits for a core, which overlapped plans gain from, while a plan
    // whose communication runs alone pays for waits that block a wakeup
    // each (measured: docs/performance.md, "Measurements behind the
    // code").
    std::optional<bool> stream_priorities;
    // On the CPU, each rank's stream threads keep to one core of those the
    // process may use: rank r's to the (r mod n)th of its n cores, so that
    // ranks beyond n share cores in turn (the cluster's PINNED core
    // sharing, which the simulator models). Under loom launch every
    // process runs one rank and pins it the same way.
    bool pin_cores = false;
    // With pin_cores: rank r keeps to the ((r + pin_offset) mod n)th core
    // (the in-step profiler runs copies of one rank side by side).
    int pin_offset = 0;
    // What the plan's passes price at (the data-parallel bucket, op-split's
    // parts), for Create; the pipeline cut counts FLOPs whatever it is, as
    // `loom run` plans. Not owned. Null: the checked-in local preset's,
    // which describes the host the ranks run on (LocalPresetCosts).
    const CostContext* costs = nullptr;
    // Where batches come from; null: the synthetic dataset.
    std::shared_ptr<const Dataset> data;
    // What checkpoints record as the model (ModelRecord); empty: the GPT
    // config. A plan of a loaded program records the program's identity
    // (ProgramRecord).
    std::map<std::string, std::string> model_record;
    // Where the ranks run: the CPU, or one CUDA device each (in-process
    // rank r on device r; under loom launch, rank r on device r modulo the
    // devices its process sees, so CUDA_VISIBLE_DEVICES may give each
    // process its own). On CUDA the ranks communicate through NCCL.
    DeviceType device = DeviceType::kCpu;
    // Test-only fault injection: this rank's labels are made out of range,
    // so its cross-entropy kernel fails in the first step.
    int poison_labels_on_rank = -1;
  };
  // Plans every rank of `config`'s training program under `strategy`,
  // then runs that plan as CreateFromPlan does.
  static StatusOr<std::unique_ptr<ParallelTrainer>> Create(
      const GptConfig& config, const OptimizerConfig& optimizer,
      const proto::Strategy& strategy, const Options& options);
  // Runs `plan`, a plan of every rank of the model `config` describes (the
  // data feed follows its batch size, sequence length and seed). The plan
  // is verified as a whole first. `source` names the plan in errors: its
  // file, or what it was planned from.
  static StatusOr<std::unique_ptr<ParallelTrainer>> CreateFromPlan(
      const GptConfig& config, Plan plan, const std::string& source,
      const Options& options);
  ~ParallelTrainer() override;

  // Trains on the global batch of `step` and returns its mean loss, the
  // quantity SerialTrainer::Step returns: each rank of the loss's stage
  // (ParallelLayout::LossStage) averages its micro-batches, and the dp
  // replicas average theirs. NaN when this process does not run the rank
  // that reports it (that stage's dp=0, mp=0 rank), so that one process of a
  // launch prints each loss. The first
  // failing rank's error is returned, naming it.
  StatusOr<float> Step(int64_t step) override;

  // The parameters and optimizer state as full tensors by name, gathered
  // from the ranks' shards (a checkpoint's tensors, whatever the layout).
  // Needs every rank in this process.
  StatusOr<TrainingState> State() override;
  // Sets every local rank's shard of them from `state` (read from
  // `source`, named in errors), which must hold exactly this model's and
  // optimizer's.
  Status SetState(const TrainingState& state, const std::string& source) override;
  bool HoldsWholeState() const override {
    return static_cast<int>(local_.size()) == plan_.layout.world_size();
  }
  const Dataset& data() const override { return *data_; }
  const GptConfig& config() const { return config_; }
  std::map<std::string, std::string> ModelRecord() const override {
    return options_.model_record.empty() ? GptConfigToMap(config_) : options_.model_record;
  }
  std::string Layout() const override;
  // Every rank uses one rate; the first local rank's, on the CPU.
  float LastLearningRate() override {
    return local_.empty() ? NAN : LearningRateIn(*scopes_.at(local_.front()));
  }
  // Every rank computes the same norm; the first local rank's.
  float LastGradNorm() override { return local_.empty() ? NAN : grad_norms_.at(local_.front()); }
  float LossScale() override {
    return local_.empty() ? NAN : HostScalarIn(*scopes_.at(local_.front()), kLossScaleVar);
  }
  // Under loom launch or srun: each process writes its dp=0 ranks' shards
  // into the hand-over directory (Options::handover_dir), and the process
  // of rank 0 waits (up to the communication timeout) for all of them and
  // merges them.
  StatusOr<std::optional<TrainingState>> StateForCheckpoint(int64_t steps_done) override;

  const Plan& plan() const { return plan_; }
  const ExecutionGraph& graph() const { return graph_; }
  // The temporaries each micro-batch keeps after the step, for the loop to
  // read (RankExecutorOptions::keep).
  static std::vector<std::string> KeptVars() { return {kLossVar, kGradNormVar}; }
  const std::vector<int>& local_ranks() const { return local_; }
  // Seconds a local rank's kernels took in the last step (RankExecutor::
  // last_compute_seconds, under Options::time_kernels): what tells a
  // straggler from the peers it holds up.
  double LastComputeSeconds(int rank) const { return executors_.at(rank)->last_compute_seconds(); }
  Scope& rank_scope(int rank) { return *scopes_.at(rank); }
  // The device rank `rank` runs on (a local rank's).
  Device& rank_device(int rank) { return *devices_.at(rank); }
  std::vector<TraceEvent> TakeTrace();
  // Whether communication streams outrank calc in this run (Options).
  bool stream_priorities() const { return priorities_; }

 private:
  ParallelTrainer(const GptConfig& config, Options options)
      : config_(config), options_(std::move(options)),
        data_(options_.data != nullptr
                  ? options_.data
                  : std::make_shared<SyntheticDataset>(config.vocab_size, config.seq_len,
                                                       config.seed)) {}
  // Writes the step's rows into the rank's micro-batch scopes, on its
  // device.
  Status Feed(int rank);
  // The rank's state as `scope` holds it (its scope, or a host mirror).
  StateHolder Holder(int rank, Scope* scope) const;
  // The rank's scope as the host can read and write it: the scope itself
  // on the CPU; on a device, a host mirror (`mirror`), which SetState
  // copies back.
  struct HostView {
    Scope* scope = nullptr;
    std::unique_ptr<Scope> mirror;
  };
  StatusOr<HostView> OnHost(int rank);
  // Runs one rank's step and reduces its loss; NaN if it computes none,
  // an error naming the step if the loss is not finite.
  StatusOr<float> RunRank(int rank, int64_t step);

  GptConfig config_;
  Options options_;
  std::shared_ptr<const Dataset> data_;
  Plan plan_;
  ExecutionGraph graph_;
  std::vector<int> local_;
  // Indexed by global rank; null for ranks of other processes. A rank's
  // device outlives its executor; its io stream carries feeds, the loss
  // and state between the host and the device.
  std::vector<int> rank_cores_;  // by rank: the core it keeps to, or -1
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<std::unique_ptr<Stream>> io_streams_;
  std::vector<std::unique_ptr<CommWorld>> worlds_;
  std::vector<std::unique_ptr<Scope>> scopes_;
  std::vector<float> grad_norms_;  // by rank: its last step's (LastGradNorm)
  std::vector<std::unique_ptr<RankExecutor>> executors_;
  std::vector<int64_t> tokens_, labels_;
  bool priorities_ = false;
  // The group of ranks whose ZeRO parts make a whole, for `rank`: its size
  // and the rank's place in it (the dp group, or under hybrid sharding the
  // rank's block of layout.sharding dp ranks).
  void PlaceInShardingGroup(int rank, int* size, int* index) const;
  // The ZeRO buckets whose state `rank` holds part of (none unsharded).
  const std::vector<ShardedBucket>& BucketsOf(int rank) const;
  // BucketsOf's, per program set, found when first asked for.
  mutable std::map<const void*, std::vector<ShardedBucket>> buckets_;
};

}  // namespace loom

#endif  // LOOM_RUNTIME_PARALLEL_TRAINER_H_
