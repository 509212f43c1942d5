// Shape helpers shared by the op definitions.
#ifndef LOOM_FRAMEWORK_OPS_OP_HELPERS_H_
#define LOOM_FRAMEWORK_OPS_OP_HELPERS_H_

#include "framework/op_builder.h"
#include "framework/op_registry.h"
#include "framework/shape_inference.h"

namespace loom {

// Numpy broadcasting: shapes align at their last dimension; a dimension of 1
// stretches. Error names both shapes.
StatusOr<Shape> BroadcastShapes(const Shape& x, const Shape& y);

// OK when `meta` is a dtype kernels compute on (fp32, bf16, fp16); else an
// error naming `slot`.
Status CheckComputeFloat(const std::string& slot, const TensorMeta& meta);

// Out has X's dtype and shape: the inference of every shape-preserving op.
Status InferSameAsX(InferShapeContext& ctx);

// Normalizes a possibly negative axis against `rank`; error if out of range.
StatusOr<int> NormalizeAxis(int axis, int rank);

// The dims a reduction reduces: `dims` normalized, sorted and deduplicated,
// or every dim when `reduce_all`.
StatusOr<std::vector<int>> NormalizeReduceDims(const std::vector<int32_t>& dims,
                                               bool reduce_all, int rank);

// Role-less grad op of the common form: reads the forward `inputs` and
// `outputs` slots named, plus the gradient of every forward output in
// `output_grads`, and writes the gradient of every input in `input_grads`.
proto::OpDesc MakeGradOp(const proto::OpDesc& forward,
                         const std::string& grad_type,
                         const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs,
                         const std::vector<std::string>& output_grads,
                         const std::vector<std::string>& input_grads);

}  // namespace loom

#endif  // LOOM_FRAMEWORK_OPS_OP_HELPERS_H_
