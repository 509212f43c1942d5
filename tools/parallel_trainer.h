// Training under a parallel strategy: plans every rank, lowers the plan to
// an ExecutionGraph, and runs each rank's graph with a RankExecutor, all
// ranks in this process (one set of stream threads per rank).
#ifndef LOOM_TOOLS_PARALLEL_TRAINER_H_
#define LOOM_TOOLS_PARALLEL_TRAINER_H_

#include <memory>
#include <vector>

#include "executor/comm/comm_world.h"
#include "executor/rank_executor.h"
#include "models/gpt.h"
#include "models/synthetic_data.h"
#include "passes/planner.h"

namespace loom {

class ParallelTrainer {
 public:
  // `comm_for_rank` gives each rank's communication kernel (empty for
  // layouts without communication).
  struct Options {
    // How the ranks meet (timeouts, store); each rank's communicators are
    // made when the layout has more than one rank.
    CommWorldOptions comm;
    // Record every executed instruction (TakeTrace).
    bool trace = false;
  };
  static StatusOr<std::unique_ptr<ParallelTrainer>> Create(
      const GptConfig& config, const OptimizerConfig& optimizer,
      const proto::Strategy& strategy, const Options& options);
  ~ParallelTrainer();

  // Trains on the global batch of `step`; returns its mean loss, the same
  // quantity SerialTrainer::Step returns.
  StatusOr<float> Step(int64_t step);

  const Plan& plan() const { return plan_; }
  Scope& rank_scope(int rank) { return *scopes_.at(rank); }
  std::vector<TraceEvent> TakeTrace();

 private:
  ParallelTrainer(const GptConfig& config) : config_(config),
      data_(config.vocab_size, config.seq_len, config.seed) {}
  void Feed(int rank, int64_t step);

  GptConfig config_;
  SyntheticDataset data_;
  Plan plan_;
  ExecutionGraph graph_;
  std::vector<std::unique_ptr<CommWorld>> worlds_;
  std::vector<std::unique_ptr<Scope>> scopes_;
  std::vector<std::unique_ptr<RankExecutor>> executors_;
  std::vector<int64_t> tokens_, labels_;
};

}  // namespace loom

#endif  // LOOM_TOOLS_PARALLEL_TRAINER_H_
