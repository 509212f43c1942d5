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

StatusOr<RankLayerPrice> RankLayerPrices::Of(const proto::Strategy& s) {
  const int64_t micro_batch =
      config_.batch_size / s.dp().degree() / s.pipeline().micro_batches();
  const int mp = s.mp().degree();
  const bool sp = s.mp().sequence_parallel();
  // Full recomputation of some layers only: priced as none, which every
  // layer costs at least.
  const std::string recompute =
      s.recompute().num_layers() > 0 ? "none" : s.recompute().granularity();
  auto [it, fresh] = prices_.try_emplace(std::make_tuple(micro_batch, mp, sp, recompute));
  if (!fresh) return it->second;
  proto::Strategy one_stage = base_;
  one_stage.MergeFrom(MakeStrategy(/*dp=*/1, mp, /*pp=*/1, /*micro_batches=*/2, "1F1B", 1));
  one_stage.mutable_mp()->set_sequence_parallel(sp);
  one_stage.mutable_recompute()->set_granularity(recompute);
  one_stage.mutable_recompute()->set_num_layers(0);
  one_stage.mutable_sharding()->set_stage(0);
  one_stage.mutable_passes()->set_op_split(false);
  StatusOr<RankLayerPrice> one = PriceModel(micro_batch, 1, one_stage);
  StatusOr<RankLayerPrice> two = one.ok() ? PriceModel(micro_batch, 2, one_stage) : one;
  if (!two.ok()) {
    prices_.erase(it);
    return two.status().WithContext(StrCat("pricing a layer on one rank of mp ", mp,
                                           sp ? " with sequence parallelism" : "",
                                           ", recompute ", recompute, ", micro-batches of ",
                                           micro_batch));
  }
  it->second.forward = std::max(0.0, two->forward - one->forward);
  it->second.backward = std::max(0.0, two->backward - one->backward);
  it->second.accumulate = std::max(0.0, two->accumulate - one->accumulate);
  it->second.unrecomputed_backward = it->second.backward;
  if (recompute != "none") {
    proto::Strategy none = s;
    none.mutable_recompute()->set_granularity("none");
    none.mutable_recompute()->set_num_layers(0);
    StatusOr<RankLayerPrice> without = Of(none);
    if (!without.ok()) {
      prices_.erase(it);
      return without.status();
    }
    it->second.unrecomputed_backward = without->backward;
  }
  return it->second;
}

}  // namespace loom
