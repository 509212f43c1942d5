// Which gradients are weight gradients, as split-backward sorts a
// backward op into its B and W halves. The sharding pass asks too: a
// parameter gather must not wait on an op that W will take.
#ifndef LOOM_PASSES_WEIGHT_GRADIENTS_H_
#define LOOM_PASSES_WEIGHT_GRADIENTS_H_

#include <string>
#include <unordered_set>

#include "framework/program.h"

namespace loom {

// The gradients in `block` that are weight gradients: a parameter's, in
// any of its forms (w@GRAD, w@GRAD@RENAME@1, w@GRAD@MP_PARTIAL,
// w@GRAD@ACCUM), or one that only reshapes into weight gradients, every
// reader of it reading nothing but gradients and making only weight
// gradients. That is the gradient of AMP's low-precision copy of a weight
// (cast back to fp32), or of a transposed tied embedding. O(ops + vars).
std::unordered_set<std::string> WeightGradients(const Block& block);

// Whether `op` makes weight gradients (of `weight_grads`) and nothing
// else: split-backward puts such an op in W where it is a GEMM, or where
// it reads what W makes.
bool OnlyWeightGradients(const Op& op, const std::unordered_set<std::string>& weight_grads);

}  // namespace loom

#endif  // LOOM_PASSES_WEIGHT_GRADIENTS_H_
