// Gradient checking by central finite differences, for any differentiable op.
//
// The op under test is put in a real program; every float output is weighted
// by fixed random values and summed into a scalar loss, AppendBackward adds
// the real grad ops, and the serial executor runs the real kernels. Each
// checked input's analytic gradient is then compared, element by element,
// with (loss(x + eps) - loss(x - eps)) / (2 eps).
#ifndef LOOM_UNITTESTS_GRAD_CHECK_H_
#define LOOM_UNITTESTS_GRAD_CHECK_H_

#include <map>
#include <string>
#include <vector>

#include "executor/tensor.h"
#include "framework/framework.pb.h"

namespace loom {
namespace testing {

struct GradCheckCase {
  // The op, with input and output var names filled in.
  proto::OpDesc op;
  // A value for every input var of the op.
  std::map<std::string, Tensor> inputs;
  // Inputs whose gradients are checked; the others are constant data.
  std::vector<std::string> check;
  // Outputs that feed the loss; empty means every float output.
  std::vector<std::string> outputs;
  float eps = 5e-3f;
  float rtol = 1e-2f;
  float atol = 1e-3f;
  // At most this many elements of each checked input are perturbed (evenly
  // spread), so large inputs stay fast.
  int max_elements = 48;
};

// Runs the check, reporting mismatches through GoogleTest (EXPECT_*).
void CheckGrad(const GradCheckCase& c);

// Uniform values in [lo, hi), reproducible from `seed`.
Tensor RandomTensor(const Shape& shape, uint64_t seed, float lo = -1.0f,
                    float hi = 1.0f);
// Like RandomTensor, but every value has |x| >= gap, for ops with a kink at 0.
Tensor RandomTensorAwayFromZero(const Shape& shape, uint64_t seed, float gap);

}  // namespace testing
}  // namespace loom

#endif  // LOOM_UNITTESTS_GRAD_CHECK_H_
