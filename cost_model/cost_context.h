// What work costs on the cluster a plan is for: an op on one stream of its
// device (OpCostEstimator) and a collective among its ranks (CommModel),
// over one cluster description. Passes that choose by cost and the
// simulator's timer read the same context, so a plan is chosen and timed
// at the same prices. Whoever plans names the cluster: nothing falls back
// to a preset behind the caller's back.
#ifndef LOOM_COST_MODEL_COST_CONTEXT_H_
#define LOOM_COST_MODEL_COST_CONTEXT_H_

#include <memory>

#include "cost_model/cluster.pb.h"
#include "cost_model/comm_model.h"
#include "cost_model/cost_table.h"
#include "cost_model/op_cost_model.h"

namespace loom {

class CostContext {
 public:
  // Ops priced by the entries of `table` measured on `cluster`, else by
  // its roofline (OpCostModel). The cluster must be valid
  // (ValidateCluster).
  CostContext(proto::Cluster cluster, CostTable table);
  // Ops priced by `ops` (not owned; it must outlive the context), for a
  // caller that already has one, or a test's simpler estimator.
  CostContext(proto::Cluster cluster, const OpCostEstimator& ops);

  CostContext(const CostContext&) = delete;
  CostContext& operator=(const CostContext&) = delete;

  const proto::Cluster& cluster() const { return comm_.cluster(); }
  const OpCostEstimator& ops() const { return *ops_; }
  const CommModel& comm() const { return comm_; }

 private:
  std::unique_ptr<OpCostModel> owned_ops_;
  const OpCostEstimator* ops_;
  CommModel comm_;
};

// The checked-in `local` preset with no measured entries (ops by
// roofline): the costs a run on this host plans with when its caller names
// no cluster (ParallelTrainer::Options::costs). Made once.
StatusOr<const CostContext*> LocalPresetCosts();

}  // namespace loom

#endif  // LOOM_COST_MODEL_COST_CONTEXT_H_
