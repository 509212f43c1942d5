// Times a plan's ops where they run: inside training steps of each rank,
// with communication reduced to its local part
// (ParallelTrainer::Options::local_communication). An op timed alone in a
// loop finds its inputs in cache and its allocations recycled; inside a
// step it follows other ops, as it will when the plan runs, and small ops
// take up to twice as long there (gpt-tiny's micro-batch slices on this
// host). Where the plan puts ranks on the host's other cores, copies of the
// timed rank run there at the same time, pinned a core each, so that ops
// share the memory system as the run's ranks will (most of what a
// neighbour cost was ranks of one process taking each other's freed
// blocks, which each rank's own pool of the host memory cache ended:
// docs/performance.md). `loom profile` fills the cost table from it.
#ifndef LOOM_PROFILING_STEP_PROFILER_H_
#define LOOM_PROFILING_STEP_PROFILER_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/gpt.h"
#include "profiling/op_profiler.h"
#include "scheduler/plan.h"

namespace loom {

class ParallelTrainer;
struct RankGraph;
struct TraceEvent;

struct StepProfileOptions {
  int warmup_steps = 2;  // untimed: allocations, caches, OpenBLAS buffers
  int steps = 7;         // timed; one sample per step
  // Copies of each timed rank run at once, one per core (at most the
  // process's cores); 0: as many as the plan has ranks.
  int side_by_side = 0;
  // Where the plan has more ranks than the copies have cores: after each
  // of the first this many sampled steps, one more step with a second copy
  // on every core, for SharedCoreLockstep (0: none).
  int shared_core_steps = 5;
  // A rank's share of the host's last-level cache (RankCacheShare): each
  // op's timing records the bytes it read past it (ColdInputBytes). 0: not
  // recorded.
  int64_t cache_share = 0;
};

// Called before each step (all timed ranks take it in turns): the step,
// from 0, and how many there are, warm-up included.
using StepProgressFn = std::function<void(int step, int total_steps)>;

// The ranks ProfileInStep times: one per program set (the others run the
// same ops), in rank order.
std::vector<int> InStepTimedRanks(const Plan& plan);

// Times the steps of `plan` (a plan of every rank of `config`'s model) op
// by op. Ranks that share a program set are timed once; the timed ranks
// take their steps in turns, all alive at once. Pure communication is not
// timed (it has no compute); the vocabulary-parallel cross entropy is,
// without its reductions. Its steps can be taken between a run's own
// (loom run --interleaved_profile), so that the timings and the run share
// the host's seconds.
class InStepProfiler {
 public:
  static StatusOr<std::unique_ptr<InStepProfiler>> Create(const GptConfig& config,
                                                          const Plan& plan,
                                                          const StepProfileOptions& options);
  ~InStepProfiler();

  // One step of every timed rank, in turns: the `step`th (from 0) of the
  // profile. Steps before options.warmup_steps are not sampled.
  Status Step(int step);

  // Every signature that computed in the sampled steps: per step, the mean
  // over the op's runs in that step, and the median over the steps
  // (OpTiming::samples steps of runs_per_sample runs, the runs of one
  // step).
  std::vector<OpTiming> Timings() const;

  // How much longer ranks on different cores take to compute in lockstep
  // than on average (>= 1): per sampled step and timed rank, the copies'
  // slowest time for each stretch of compute between the rank's
  // communicating instructions, summed, over the sum of their mean times;
  // the median over those. A VM's cores drift apart in speed, and ranks
  // that meet at every collective or transfer wait for the slowest each
  // time. Absent with one copy.
  std::optional<double> LockstepSlowdown() const;
  // The same with a second copy on each core, as where a plan pins two
  // ranks to a core: the OS runs the two a slice at a time, and a copy
  // reaches the end of a stretch a slice early or late. Over the first
  // copies, one per core, each beside its second copy; the median over
  // options.shared_core_steps steps of each timed rank. Absent where the
  // plan has no more ranks than the copies have cores.
  std::optional<double> SharedCoreLockstep() const;
  int copies() const { return copies_; }

 private:
  struct TimedRank {
    std::vector<std::unique_ptr<ParallelTrainer>> copies;  // copy c on core c
    // The second copy on core c, for SharedCoreLockstep; empty: not measured.
    std::vector<std::unique_ptr<ParallelTrainer>> beside;
    const RankGraph* graph = nullptr;
    std::vector<int> prev;  // the instruction before each on its stream, or -1
    std::vector<int> stretch;  // StretchOf: the compute stretch of each instruction
    std::vector<int64_t> cold;  // ColdInputBytes of each instruction; empty: not recorded
  };
  struct Samples {
    OpTiming timing;
    std::vector<double> step_means;
    int runs_per_step = 0;
    double cold_bytes = 0;  // over the runs sampled
    int cold_runs = 0;
  };
  InStepProfiler() = default;
  void AddStepSamples(const TimedRank& t, const std::vector<TraceEvent>& events);
  // The copies' slowest time per stretch, summed, over their mean's sum.
  static std::optional<double> LockstepRatio(const TimedRank& t,
                                             const std::vector<std::vector<TraceEvent>>& copies);
  // Runs one step of every trainer at once; their events, in order.
  static StatusOr<std::vector<std::vector<TraceEvent>>> StepTogether(
      const std::vector<ParallelTrainer*>& trainers, int step);

  StepProfileOptions options_;
  std::vector<int> ranks_;
  int copies_ = 1;
  std::vector<TimedRank> timed_;
  std::map<std::string, Samples> by_signature_;
  std::vector<double> lockstep_ratios_;
  std::vector<double> shared_lockstep_ratios_;
};

// What ProfileInStep measured: the InStepProfiler's timings and its
// lockstep slowdowns.
struct InStepProfile {
  std::vector<OpTiming> timings;
  std::optional<double> lockstep;              // LockstepSlowdown
  std::optional<double> shared_core_lockstep;  // SharedCoreLockstep
  int copies = 1;                              // copies(): the cores the lockstep spans
};

// An InStepProfiler's warm-up and timed steps, one after the other.
StatusOr<InStepProfile> ProfileInStep(const GptConfig& config, const Plan& plan,
                                      const StepProfileOptions& options,
                                      const StepProgressFn& progress = nullptr);

}  // namespace loom

#endif  // LOOM_PROFILING_STEP_PROFILER_H_
