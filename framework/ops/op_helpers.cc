#include "framework/ops/op_helpers.h"

#include <algorithm>

namespace loom {

StatusOr<Shape> BroadcastShapes(const Shape& x, const Shape& y) {
  size_t rank = std::max(x.size(), y.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t dx = i < rank - x.size() ? 1 : x[i - (rank - x.size())];
    int64_t dy = i < rank - y.size() ? 1 : y[i - (rank - y.size())];
    if (dx != dy && dx != 1 && dy != 1) {
      return InvalidArgument("shapes ", ShapeToString(x), " and ",
                             ShapeToString(y), " do not broadcast");
    }
    out[i] = dx == 1 ? dy : dx;
  }
  return out;
}

Status CheckComputeFloat(const std::string& slot, const TensorMeta& meta) {
  if (IsComputeFloat(meta.dtype)) return Status::OK();
  return InvalidArgument(slot, " must be fp32, bf16 or fp16, but is ", DataTypeName(meta.dtype));
}

Status InferSameAsX(InferShapeContext& ctx) {
  ctx.ShareMeta("X", "Out");
  return Status::OK();
}

StatusOr<int> NormalizeAxis(int axis, int rank) {
  int a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) {
    return InvalidArgument("axis ", axis, " is out of range for rank ", rank);
  }
  return a;
}

StatusOr<std::vector<int>> NormalizeReduceDims(const std::vector<int32_t>& dims,
                                               bool reduce_all, int rank) {
  std::vector<int> out;
  if (reduce_all) {
    for (int i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (int d : dims) {
    LOOM_ASSIGN_OR_RETURN(int a, NormalizeAxis(d, rank));
    out.push_back(a);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

proto::OpDesc MakeGradOp(const proto::OpDesc& forward,
                         const std::string& grad_type,
                         const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs,
                         const std::vector<std::string>& output_grads,
                         const std::vector<std::string>& input_grads) {
  GradOpBuilder b(forward, grad_type);
  for (const auto& s : inputs) b.ForwardInput(s);
  for (const auto& s : outputs) b.ForwardOutput(s);
  for (const auto& s : output_grads) b.OutputGrad(s);
  for (const auto& s : input_grads) b.InputGrad(s);
  return b.Build();
}

}  // namespace loom
