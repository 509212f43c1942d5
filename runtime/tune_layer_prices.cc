#include "runtime/tune_layer_prices.h"

#include <algorithm>

#include "framework/op_registry.h"
#include "passes/amp.h"
#include "passes/strategy.h"

namespace loom {

RankLayerPrices::RankLayerPrices(const GptConfig& config, const OptimizerConfig& optimizer,
                                 const proto::Strategy& base, const CostContext& costs)
    : config_(config), optimizer_(optimizer), base_(base), costs_(costs) {}

StatusOr<RankLayerPrice> RankLayerPrices::PriceModel(int64_t micro_batch, int layers,
                                                     const proto::Strategy& strategy) {
  std::unique_ptr<GptPrograms>& programs = programs_[{micro_batch, layers}];
  if (programs == nullptr) {
    GptConfig c = config_;
    c.num_layers = layers;
    c.batch_size = 2 * micro_batch;
    LOOM_ASSIGN_OR_RETURN(const AmpConfig amp, AmpConfigOf(base_));
    LOOM_ASSIGN_OR_RETURN(programs, GptPrograms::Build(c, optimizer_, amp));
  }
  PlanOptions options;
  options.share_tensor_parallel_ranks = true;
  options.costs = &costs_;
  options.pass_manager.verify_each = false;
  // Rank 0 stands for its group: every mp rank runs the same ops.
  LOOM_ASSIGN_OR_RETURN(const Plan plan, programs->PlanOf(strategy, {0}, options));
  RankLayerPrice price;
  for (const auto& [key, program] : plan.ranks[0].programs()) {
    if (key.type != JobType::kForward && key.type != JobType::kBackward) continue;
    const bool backward = key.type == JobType::kBackward;
    const Block& block = program.global_block();
    for (const Op* op : block.ops()) {
      const proto::OpDesc& d = op->desc();
      if (d.first_micro_batch_only() || d.last_micro_batch_only() ||
          CommKindOf(op->type()) != CommKind::kNone) {
        continue;
      }
      const std::vector<std::string> outputs = op->OutputVars();
      const bool accumulates = std::any_of(outputs.begin(), outputs.end(), [&](const auto& out) {
        const proto::VarDesc* v = block.FindVar(out);
        return v != nullptr && v->persistable();
      });
      double* sum = nullptr;
      if (backward && (accumulates || op->type() == "cast")) {
        sum = &price.accumulate;
      } else if (op->type() != "cast" && !accumulates) {
        sum = backward ? &price.backward : &price.forward;
      }
      if (sum == nullptr) continue;
      LOOM_ASSIGN_OR_RETURN(const OpCost cost, costs_.ops().EstimateOp(*op));
      *sum += cost.seconds;
    }
  }
  return price;
}

StatusOr<RankLayerPrice> RankLayerPrices::PriceLayer(int64_t micro_batch, int mp, bool sp,
                                                     const std::string& recompute) {
  proto::Strategy one_stage = base_;
  one_stage.MergeFrom(MakeStrategy(/*dp=*/1, mp, /*pp=*/1, /*micro_batches=*/2, "1F1B", 1));
  one_stage.mutable_mp()->set_sequence_parallel(sp);
  one_stage.mutable_recompute()->set_granularity(recompute);
  one_stage.mutable_recompute()->set_num_layers(0);
  one_stage.mutable_sharding()->set_stage(0);
  one_stage.mutable_passes()->set_op_split(false);
  LOOM_ASSIGN_OR_RETURN(const RankLayerPrice one, PriceModel(micro_batch, 1, one_stage));
  LOOM_ASSIGN_OR_RETURN(const RankLayerPrice two, PriceModel(micro_batch, 2, one_stage));
  RankLayerPrice layer;
  layer.forward = std::max(0.0, two.forward - one.forward);
  layer.backward = std::max(0.0, two.backward - one.backward);
  layer.accumulate = std::max(0.0, two.accumulate - one.accumulate);
  layer.unrecomputed_backward = layer.backward;
  return layer;
}

RankLayerPrice RankLayerPrices::Of(const proto::Strategy& s) {
  const int64_t micro_batch =
      config_.batch_size / s.dp().degree() / s.pipeline().micro_batches();
  const int mp = s.mp().degree();
  const bool sp = s.mp().sequence_parallel();
  // Full recomputation of some layers only: priced as none, which every
  // layer costs at least.
  const std::string recompute =
      s.recompute().num_layers() > 0 ? "none" : s.recompute().granularity();
  const auto key = std::make_tuple(micro_batch, mp, sp, recompute);
  if (auto it = prices_.find(key); it != prices_.end()) return it->second;
  const StatusOr<RankLayerPrice> priced = PriceLayer(micro_batch, mp, sp, recompute);
  RankLayerPrice price = priced.ok() ? *priced : RankLayerPrice{};
  if (priced.ok() && recompute != "none") {
    proto::Strategy none = s;
    none.mutable_recompute()->set_granularity("none");
    none.mutable_recompute()->set_num_layers(0);
    price.unrecomputed_backward = Of(none).unrecomputed_backward;
  }
  prices_.emplace(key, price);
  return price;
}

}  // namespace loom
