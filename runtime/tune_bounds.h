// Lower bounds on a `loom tune` candidate (runtime/tune_space.h): no plan
// of it steps faster than its time bound, and its fullest rank holds at
// least its memory bound. Priced on the cluster's cost model, from the
// serial program; nothing is planned.
#ifndef LOOM_RUNTIME_TUNE_BOUNDS_H_
#define LOOM_RUNTIME_TUNE_BOUNDS_H_

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

// One micro-batch of the serial program, priced op by op on the cluster's
// cost model in the strategy's precision. Each op's price is its fixed
// cost (the kernel launch, which every rank holding a part of the op pays
// whole) and its work (which tensor parallelism divides): a rank's share
// is bounded below as long as the model prices a 1/k part of an op's work
// at no less than 1/k of it, as the roofline does.
struct PhaseCost {
  double fixed = 0, work = 0;
  void Add(double seconds, double launch) {
    const double f = std::min(seconds, launch);
    fixed += f;
    work += seconds - f;
  }
  // One rank's share where `mp` ranks split each op and `stages` split the ops.
  double Share(int mp, int stages) const { return (fixed + work / mp) / stages; }
  // What all `mp` ranks of the op spend on it together.
  double Total(int mp) const { return fixed * mp + work; }
};
struct SerialCost {
  PhaseCost forward, backward, optimizer;
  // The transformer layers' forward and backward, all layers.
  PhaseCost layers_forward, layers_backward;
  // Those of an average layer.
  PhaseCost layer_forward, layer_backward;
  void Average(int64_t layers) {
    const double n = static_cast<double>(std::max<int64_t>(1, layers));
    layer_forward = {layers_forward.fixed / n, layers_forward.work / n};
    layer_backward = {layers_backward.fixed / n, layers_backward.work / n};
  }
};


struct CandidateBounds {
  double time_s = 0;
  // What the calc and mp streams need of it: time_s but for the calls the
  // dp or sharding stream carries.
  double compute_s = 0;
  int64_t memory_bytes = 0;
};

// The bounds of a search's candidates: the serial program's prices by
// micro-batch size and the schedules' job lists by pipeline shape are
// found once and kept for the candidates that share them.
class TuneBounds {
 public:
  // `base` gives the precision the serial program is priced in. All must
  // outlive this.
  TuneBounds(const GptConfig& config, const OptimizerConfig& optimizer, const proto::Strategy& base,
             const CostContext& costs);

  // The bounds of `strategy`, a valid strategy of `base`'s precision. An
  // error names the micro-batch whose program the cost model could not
  // price.
  StatusOr<CandidateBounds> Of(const proto::Strategy& strategy);

  // Micro-batches a stage holds at once: forwards whose B (or whole
  // backward) has not run, and Bs whose W has not.
  struct InFlight {
    int before_b = 0, before_w = 0;
  };
  // Each stage's fullest moments (tune_bounds.cc), listed once per
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
  // The layers of each virtual stage as pipeline-split cuts `s`'s
  // pipeline, under each pricing it may cut by (the cost model's times, or
  // FLOPs); none where the layers do not all cost alike.
  StatusOr<const std::vector<std::vector<int>>*> VirtualStageLayers(const proto::Strategy& s);
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
  std::map<int64_t, SerialCost> serial_costs_;  // by micro-batch size
  InFlightTable in_flight_;
  std::optional<std::vector<ForwardCosts>> cut_costs_;  // found at the first candidate
  // By (stages, chunks, v-shape).
  std::map<std::tuple<int, int, bool>, std::vector<std::vector<int>>> virtual_stage_layers_;
  // By schedule, stages, micro-batches, chunks, max in flight and after_b.
  using HeldKey = std::tuple<std::string, int, int, int, int64_t, double>;
  std::map<HeldKey, double> held_;
};

}  // namespace loom

#endif  // LOOM_RUNTIME_TUNE_BOUNDS_H_
