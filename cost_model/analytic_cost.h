// An analytic op cost, in floating-point operations, from shapes alone.
// It orders and balances work (pipeline stage boundaries) until the
// profiled, empirical tables of the cost model exist; it has no constants
// fitted to any model.
#ifndef LOOM_COST_MODEL_ANALYTIC_COST_H_
#define LOOM_COST_MODEL_ANALYTIC_COST_H_

#include "framework/program.h"

namespace loom {

// matmul and its gradient: 2*M*N*K per product; everything else: the
// number of elements it writes (a memory-bound op touches each once).
double AnalyticFlops(const Op& op);

}  // namespace loom

#endif  // LOOM_COST_MODEL_ANALYTIC_COST_H_
