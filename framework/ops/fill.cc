// Ops with no inputs that create values: constants and seeded random fills.
#include "framework/ops/op_helpers.h"

namespace loom {
namespace {

Status InferFill(InferShapeContext& ctx) {
  auto shape = ctx.Attr<std::vector<int64_t>>("shape");
  for (int64_t d : shape) {
    if (d < 0) {
      return InvalidArgument("attribute shape ", ShapeToString(shape),
                             " has a negative dimension");
    }
  }
  int dtype = ctx.Attr<int32_t>("dtype");
  if (!proto::DataType_IsValid(dtype)) {
    return InvalidArgument("attribute dtype ", dtype, " is not a data type");
  }
  ctx.SetOutput("Out",
                TensorMeta{static_cast<DataType>(dtype), Shape(shape)});
  return Status::OK();
}

}  // namespace

void RegisterFillOps() {
  OpRegistry::Global().Register(
      OpSchema("fill_constant")
          .Output("Out")
          .RequiredAttr<std::vector<int64_t>>("shape")
          .Attr<int32_t>("dtype", proto::FP32)
          .Attr<float>("value", 0.0f)
          .SetInferShape(InferFill)
          .Doc("Out = value everywhere."));
  OpRegistry::Global().Register(
      OpSchema("gaussian_random")
          .Output("Out")
          .RequiredAttr<std::vector<int64_t>>("shape")
          .Attr<int32_t>("dtype", proto::FP32)
          .Attr<float>("mean", 0.0f)
          .Attr<float>("std", 1.0f)
          .Attr<int64_t>("seed", 0)
          .SetInferShape(InferFill)
          .Doc("Normal samples; the same seed gives the same values on any "
               "machine."));
  OpRegistry::Global().Register(
      OpSchema("uniform_random")
          .Output("Out")
          .RequiredAttr<std::vector<int64_t>>("shape")
          .Attr<int32_t>("dtype", proto::FP32)
          .Attr<float>("min", -1.0f)
          .Attr<float>("max", 1.0f)
          .Attr<int64_t>("seed", 0)
          .SetInferShape(InferFill)
          .Doc("Uniform samples in [min, max), reproducible from the seed."));
}

}  // namespace loom
