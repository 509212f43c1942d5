// Seconds an op takes on one stream of a cluster's device, from the
// profiled cost table where it can, from the device's peaks where it must.
//
// Lookup order (OpCostModel::Estimate):
//  1. profiled: the table has the op's signature on this cluster's device;
//     the entry's median, as measured.
//  2. scaled: the table has other ops of the same type and compute dtype
//     on this device; the nearest one is scaled by FLOPs when the op is
//     compute-bound, by bytes when it is memory-bound (see Estimate). Not
//     from a neighbour whose time is under twice the launch overhead (its
//     work does not show), nor by more than 64x either way.
//  3. roofline: launch overhead + max(FLOPs / peak, bytes / bandwidth),
//     the stream's share of the device (cluster.h).
// An op with neither an entry nor any work (0 FLOPs and 0 bytes) is an
// error, never a silent zero. Communication (the comm_bytes of OpWork) is
// CommModel's: an op that only communicates is an error here.
#ifndef LOOM_COST_MODEL_OP_COST_MODEL_H_
#define LOOM_COST_MODEL_OP_COST_MODEL_H_

#include <optional>
#include <string>

#include "cost_model/cluster.pb.h"
#include "cost_model/cost_table.h"
#include "framework/op_work.h"
#include "framework/program.h"
#include "framework/types.h"

namespace loom {

enum class CostRule { kProfiled, kScaled, kRoofline };

struct OpCost {
  double seconds = 0;
  CostRule rule = CostRule::kRoofline;
  // Why, for logs: the entry used (profiled, scaled) or the bound that
  // decided (roofline).
  std::string basis;
  // A profiled price: the bytes per run the op read past the cache where it
  // was timed (CostEntry.cold_input_bytes); -1 where unknown.
  double cold_input_bytes = -1;
};

// What passes and the simulator call; tests may inject a simpler one.
class OpCostEstimator {
 public:
  virtual ~OpCostEstimator() = default;
  virtual StatusOr<OpCost> Estimate(const std::string& type,
                                    const std::string& signature,
                                    const OpWork& work) const = 0;
  // Estimate over WorkOf and OpSignature; errors carry the op's location.
  StatusOr<OpCost> EstimateOp(const Op& op) const;
};

// True for an op the cost table never prices: a view, or a join written
// in place, that does no work (WorkOf gives it 0 FLOPs and 0 bytes).
bool NoWorkView(const std::string& type, const OpWork& work);

// The arithmetic dtype of a signature: its first floating tensor's dtype
// ("matmul bf16[8,4] ..." -> BF16); FP32 when it has none.
DataType ComputeDtypeOf(const std::string& signature);

// Immutable once built, so one model may serve many threads.
class OpCostModel final : public OpCostEstimator {
 public:
  // Uses the entries of `table` whose device is `cluster`'s name. The
  // cluster must be valid (ValidateCluster).
  OpCostModel(proto::Cluster cluster, CostTable table);

  StatusOr<OpCost> Estimate(const std::string& type,
                            const std::string& signature,
                            const OpWork& work) const override;

  // Rule 3 alone.
  double RooflineSeconds(const OpWork& work, DataType dtype) const;
  // Its FLOPs take at least as long as its bytes.
  bool ComputeBound(const OpWork& work, DataType dtype) const;
  // Its FLOPs at the stream's sustained rate, its matrix products' by the
  // waves of tiles they run in.
  double ComputeSeconds(const OpWork& work, DataType dtype) const;

  const proto::Cluster& cluster() const { return cluster_; }
  const CostTable& table() const { return table_; }

 private:
  // Rule 2, or nothing when no entry of the type is comparable.
  std::optional<OpCost> Scaled(const std::string& type, const OpWork& work,
                               DataType dtype) const;

  proto::Cluster cluster_;
  CostTable table_;
};

}  // namespace loom

#endif  // LOOM_COST_MODEL_OP_COST_MODEL_H_
