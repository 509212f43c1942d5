// Reverse-mode automatic differentiation over a program.
#ifndef LOOM_FRAMEWORK_AUTODIFF_H_
#define LOOM_FRAMEWORK_AUTODIFF_H_

#include <string>
#include <utility>
#include <vector>

#include "framework/program.h"

namespace loom {

struct ParamGradPair {
  std::string param;
  std::string grad;
};

// Appends to block 0 the ops that compute d(loss)/d(param) for every
// trainable parameter (is_parameter and not stop_gradient) the loss depends
// on. Grad ops get role backward; the op seeding d(loss)/d(loss) = 1 gets
// backward|loss.
//
// A var read by several ops receives one gradient contribution from each;
// they are written to distinct temporaries and added by one `sum` op, in
// reverse program order, as soon as the last contribution exists. The op
// that produces a parameter's final gradient carries the (param, grad) pair
// in its param_grads field.
//
// Returns the pairs in the order their gradients are completed, which is the
// order a data-parallel pass should issue their all-reduces.
StatusOr<std::vector<ParamGradPair>> AppendBackward(Program& program,
                                                    const std::string& loss);

}  // namespace loom

#endif  // LOOM_FRAMEWORK_AUTODIFF_H_
