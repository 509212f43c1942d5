#include "cost_model/analytic_cost.h"

#include "framework/shape_inference.h"

namespace loom {
namespace {

Shape VarShape(const Block& block, const std::string& name) {
  const proto::VarDesc* v = block.FindVar(name);
  return v == nullptr ? Shape{} : MetaOf(*v).shape;
}

// 2*M*N*K of Out = X @ Y, from the shapes of X and Out.
double MatmulFlops(const Op& op, const Block& block, const std::string& out) {
  Shape x = VarShape(block, op.Input("X"));
  Shape o = VarShape(block, out);
  if (x.size() < 2 || o.empty()) return 0;
  const bool tx = op.GetAttr<bool>("transpose_x");
  const double k = static_cast<double>(tx ? x[x.size() - 2] : x.back());
  return 2.0 * static_cast<double>(NumElements(o)) * k;
}

}  // namespace

double AnalyticFlops(const Op& op) {
  const Block& block = *op.block();
  if (op.type() == "matmul") return MatmulFlops(op, block, op.Output("Out"));
  if (op.type() == "matmul_grad") {
    // Each gradient present is one product as large as the forward one.
    const std::string dout = op.Input("Out@GRAD");
    double one = MatmulFlops(op, block, dout);
    return one * (op.HasOutput("X@GRAD") + op.HasOutput("Y@GRAD"));
  }
  double n = 0;
  for (const std::string& out : op.OutputVars()) {
    n += static_cast<double>(NumElements(VarShape(block, out)));
  }
  return n;
}

}  // namespace loom
