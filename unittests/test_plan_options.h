// What a test plans with when it names no cluster.
#ifndef LOOM_UNITTESTS_TEST_PLAN_OPTIONS_H_
#define LOOM_UNITTESTS_TEST_PLAN_OPTIONS_H_

#include "cost_model/cost_context.h"
#include "passes/planner.h"

namespace loom {

// The checked-in local preset's costs without measured entries, and the
// pipeline cut by FLOPs: what `loom run` plans with on this host. The
// planner itself has no default cluster, so a test that plans data-parallel
// buckets, ZeRO's automatic fetch or op-split names one.
inline PlanOptions LocalPlanOptions(PlanOptions options = {}) {
  options.costs = LocalPresetCosts().value();
  options.cut_by_flops = true;
  return options;
}

// The same at `costs`, the context the test's simulator times with.
inline PlanOptions PlanOptionsAt(const CostContext& costs) {
  PlanOptions options;
  options.costs = &costs;
  options.cut_by_flops = true;
  return options;
}

// LocalPlanOptions, with the program verified after every pass.
inline PlanOptions VerifiedPlanOptions() {
  PlanOptions options = LocalPlanOptions();
  options.pass_manager.verify_each = true;
  return options;
}

}  // namespace loom

#endif  // LOOM_UNITTESTS_TEST_PLAN_OPTIONS_H_
