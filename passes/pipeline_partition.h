// Where pipeline-split cuts a program's layers into virtual stages, as
// functions of the layers' forward costs: the pass cuts with them, and
// `loom tune`'s memory bound (runtime/tune_bounds.h) asks them how many
// layers a candidate's stages will hold without planning it.
#ifndef LOOM_PASSES_PIPELINE_PARTITION_H_
#define LOOM_PASSES_PIPELINE_PARTITION_H_

#include <functional>
#include <vector>

#include "framework/program.h"
#include "framework/status.h"

namespace loom {

// A program's forward by layer (OpDesc.layer): what each layer's ops
// cost, and the unannotated ops before the first layer (the embedding)
// and after the last (the head and loss). An unannotated op between
// layers counts toward the layer before it.
struct ForwardCosts {
  std::vector<double> layers;
  double pre = 0, post = 0;
};

using OpCostFn = std::function<StatusOr<double>(const Op&)>;

// An error where no forward op carries a layer; one from `cost_of` as it is.
StatusOr<ForwardCosts> ForwardCostsByLayer(const std::vector<Op*>& ops, const OpCostFn& cost_of);

// The first layer of each of `parts` contiguous groups that minimize the
// costliest group, `pre` added to the first and `post` to the last. Each
// group keeps a layer. O(parts x layers^2).
std::vector<int> BalancedPartition(const std::vector<double>& layers, int parts, double pre,
                                   double post);

// The first layer of each of the 2 x `stages` virtual stages of a V (ZBV),
// whose stage s runs virtual stages s and 2 stages - 1 - s, so that stage
// 0 holds both ends of the model. O(layers log stages).
std::vector<int> VShapedPartition(const std::vector<double>& layers, int stages, double pre,
                                  double post);

// The first layer of each of `stages` x `chunks` virtual stages as
// pipeline-split cuts them: in a V under `v_shape`, evenly over VPP's
// chunks (which must divide the layers), else balanced. The caller checks
// that there are at least as many layers as virtual stages.
std::vector<int> VirtualStageStarts(const ForwardCosts& costs, int stages, int chunks,
                                    bool v_shape);

}  // namespace loom

#endif  // LOOM_PASSES_PIPELINE_PARTITION_H_
