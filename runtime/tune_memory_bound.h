// loom tune's memory bound (runtime/tune_bounds.h): what the fullest rank
// of a candidate holds at least, from its ZeRO stage, its recomputation,
// the micro-batches its schedule keeps in flight and the layers
// pipeline-split's cut (passes/pipeline_partition.h) gives each stage.
// Priced from the serial program on the cluster's cost model; nothing is
// planned.
#ifndef LOOM_RUNTIME_TUNE_MEMORY_BOUND_H_
#define LOOM_RUNTIME_TUNE_MEMORY_BOUND_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "cost_model/cost_context.h"
#include "framework/optimizer.h"
#include "models/gpt.h"
#include "passes/pipeline_partition.h"
#include "passes/strategy.h"
#include "scheduler/schedule.h"

namespace loom {

// Keeps what candidates share: the job lists by pipeline shape and the cut
// by pipeline degree and chunks.
class MemoryBound {
 public:
  // `base` gives the precision the layers are priced in for the cut. All
  // must outlive this.
  MemoryBound(const GptConfig& config, const OptimizerConfig& optimizer,
              const proto::Strategy& base, const CostContext& costs);

  // Bytes the fullest rank of `strategy`, a valid strategy of `base`'s
  // precision, holds at least. An error where the cost model cannot price
  // the layers the cut is made by.
  StatusOr<int64_t> Of(const proto::Strategy& strategy);

  // The layers of the first virtual stage (the first stage's first chunk)
  // as pipeline-split cuts `strategy`'s pipeline, the fewer of its two
  // pricings; 0 where the layers do not all cost alike.
  StatusOr<int> FirstChunkLayers(const proto::Strategy& strategy);

  // The layers of each virtual stage as pipeline-split cuts `strategy`'s
  // pipeline, under each pricing it may cut by (the cost model's times, or
  // FLOPs); none where the layers do not all cost alike.
  StatusOr<const std::vector<std::vector<int>>*> VirtualStageLayers(
      const proto::Strategy& strategy);

  // Micro-batches a stage holds at once: forwards whose B (or whole
  // backward) has not run, and Bs whose W has not.
  struct InFlight {
    int before_b = 0, before_w = 0;
  };
  // Each stage's fullest moments (tune_memory_bound.cc), listed once per
  // pipeline shape: candidates differ in knobs job lists ignore.
  class InFlightTable {
   public:
    const std::vector<std::vector<InFlight>>& Of(const ScheduleInfo& schedule,
                                                 const proto::Strategy& s);

   private:
    using Key = std::tuple<std::string, int, int, int, int64_t>;
    std::map<Key, std::vector<std::vector<InFlight>>> table_;
  };

 private:
  // Layer-micro-batches the fullest stage holds at once under `s`'s
  // schedule over `cuts` (in units of one whose B has not run; one whose
  // B has and W has not counts `after_b`), under the cut that makes it
  // least; 0 without cuts.
  double HeldByCut(const proto::Strategy& s, const std::vector<std::vector<int>>& cuts,
                   double after_b);

  const GptConfig& config_;
  const OptimizerConfig& optimizer_;
  const proto::Strategy& base_;
  const CostContext& costs_;
  InFlightTable in_flight_;
  std::optional<std::vector<ForwardCosts>> cut_costs_;  // found at the first candidate
  // By (stages, chunks, v-shape).
  std::map<std::tuple<int, int, bool>, std::vector<std::vector<int>>> virtual_stage_layers_;
  // By schedule, stages, micro-batches, chunks, max in flight and after_b.
  using HeldKey = std::tuple<std::string, int, int, int, int64_t, double>;
  std::map<HeldKey, double> held_;
};

}  // namespace loom

#endif  // LOOM_RUNTIME_TUNE_MEMORY_BOUND_H_
