// What one transformer layer's forward and backward cost a rank of a
// tensor-parallel group, per micro-batch, for loom tune's time bound
// (runtime/tune_bounds.h). Priced on the programs the passes make for the
// rank, not as a share of the serial layer: without sequence parallelism
// every rank of the group runs the layer norms, dropouts and residual adds
// whole, which a share of the serial price divides among them.
#ifndef LOOM_RUNTIME_TUNE_LAYER_PRICES_H_
#define LOOM_RUNTIME_TUNE_LAYER_PRICES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "cost_model/cost_context.h"
#include "framework/optimizer.h"
#include "models/gpt.h"
#include "runtime/gpt_plan.h"

namespace loom {

// Seconds a rank spends on one layer of one micro-batch: the forward job's
// ops, and the backward's (the recomputed ones included). Lower bounds on
// what any plan of the same micro-batch size, tensor-parallel degree,
// sequence parallelism and recomputation runs in every micro-batch: the
// casts are left out (plans cast weights once a step, or ZeRO stage 3 once
// a shard), as are the ops a plan runs in the first or last micro-batch
// only, the calls, and op-split (whose parts cost at least their whole).
// `accumulate` is apart: the backward's casts of the weight gradients and
// their sums into the step's accumulators, which plans of several
// micro-batches run whole in each below ZeRO stage 2 (from stage 2 on they
// sum shards).
// `unrecomputed_backward` is the backward without what it recomputes, which
// need not wait for the layer's output gradient.
struct RankLayerPrice {
  double forward = 0, backward = 0, accumulate = 0;
  double unrecomputed_backward = 0;
};

class RankLayerPrices {
 public:
  // `base` gives the precision. All must outlive this.
  RankLayerPrices(const GptConfig& config, const OptimizerConfig& optimizer,
                  const proto::Strategy& base, const CostContext& costs);

  // The price for `strategy`'s micro-batch size, mp degree, sequence
  // parallelism and recomputation, found once for every strategy sharing
  // them. All zeros where the planner rejects the one-stage plan: the
  // bound then rests on the serial program's prices, and the candidate's
  // own plan, which fails alike, reports why.
  RankLayerPrice Of(const proto::Strategy& strategy);

 private:
  // One and two layers of the model planned on one stage: their
  // difference is the layer's.
  StatusOr<RankLayerPrice> PriceLayer(int64_t micro_batch, int mp, bool sp,
                                      const std::string& recompute);
  // The price of the model with `layers` layers, in a plan of two
  // micro-batches (so that it accumulates gradients).
  StatusOr<RankLayerPrice> PriceModel(int64_t micro_batch, int layers,
                                      const proto::Strategy& strategy);

  const GptConfig& config_;
  const OptimizerConfig& optimizer_;
  const proto::Strategy& base_;
  const CostContext& costs_;
  // By (micro-batch size, layers): programs of two micro-batches.
  std::map<std::pair<int64_t, int>, std::unique_ptr<GptPrograms>> programs_;
  // By (micro-batch size, mp, sequence parallelism, recomputation).
  std::map<std::tuple<int64_t, int, bool, std::string>, RankLayerPrice> prices_;
};

}  // namespace loom

#endif  // LOOM_RUNTIME_TUNE_LAYER_PRICES_H_
