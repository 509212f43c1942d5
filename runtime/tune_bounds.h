// Lower bounds on a `loom tune` candidate (runtime/tune_space.h): no plan
// of it steps faster than its time bound, and its fullest rank holds at
// least its memory bound. Priced on the cluster's cost model, from the
// serial program; nothing is planned.
#ifndef LOOM_RUNTIME_TUNE_BOUNDS_H_
#define LOOM_RUNTIME_TUNE_BOUNDS_H_

#include <algorithm>
#include <cstdint>
#include <map>

#include "cost_model/cost_context.h"
#include "framework/optimizer.h"
#include "models/gpt.h"
#include "passes/strategy.h"
#include "runtime/tune_layer_prices.h"
#include "runtime/tune_memory_bound.h"

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
  // The ops outside the layers, forward and backward: before the first
  // layer (the embedding) and after the last (the final norm, the head and
  // the loss). Pipeline-split puts them on the first and the last virtual
  // stage.
  PhaseCost pre, post;
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
// micro-batch size, and what the memory bound keeps (MemoryBound), are
// found once for the candidates that share them.
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

 private:
  // What the data-parallel stream carries at least (tune_bounds.cc).
  double DataParallelStream(const proto::Strategy& s) const;

  const GptConfig& config_;
  const OptimizerConfig& optimizer_;
  const proto::Strategy& base_;
  const CostContext& costs_;
  std::map<int64_t, SerialCost> serial_costs_;  // by micro-batch size
  RankLayerPrices layer_prices_;
  MemoryBound memory_;
};

}  // namespace loom

#endif  // LOOM_RUNTIME_TUNE_BOUNDS_H_
