// Elementwise activations: gelu and relu, and their gradients.
#include "framework/ops/op_helpers.h"

namespace loom {
namespace {

Status InferActivation(InferShapeContext& ctx) {
  const TensorMeta& x = ctx.Input("X");
  LOOM_RETURN_IF_ERROR(CheckComputeFloat("X", x));
  ctx.SetOutput("Out", x);
  return Status::OK();
}

// The gradient has the meta of `from` (X or Out, which share it).
InferShapeFn InferGradFrom(const std::string& from) {
  return [from](InferShapeContext& ctx) {
    ctx.ShareMeta(from, GradSlot("X"));
    return Status::OK();
  };
}

}  // namespace

void RegisterActivationOps() {
  OpRegistry::Global().Register(
      OpSchema("gelu")
          .Input("X")
          .Output("Out")
          .Attr<bool>("approximate", false)
          .SetInferShape(InferActivation)
          .SetGradMaker([](const proto::OpDesc& fwd) {
            return std::vector<proto::OpDesc>{
                MakeGradOp(fwd, "gelu_grad", {"X"}, {}, {"Out"}, {"X"})};
          })
          .Doc("Out = 0.5 X (1 + erf(X / sqrt 2)), or its tanh approximation "
               "when `approximate`."));
  OpRegistry::Global().Register(
      OpSchema("gelu_grad")
          .Input("X")
          .Input(GradSlot("Out"))
          .Output(GradSlot("X"))
          .Attr<bool>("approximate", false)
          .SetInferShape(InferGradFrom("X"))
          .Doc("Gradient of gelu, from X."));

  OpRegistry::Global().Register(
      OpSchema("relu")
          .Input("X")
          .Output("Out")
          .SetInferShape(InferActivation)
          .SetGradMaker([](const proto::OpDesc& fwd) {
            // Out > 0 exactly where X > 0, so the grad needs only Out and X's
            // buffer can be freed after the forward op.
            return std::vector<proto::OpDesc>{
                MakeGradOp(fwd, "relu_grad", {}, {"Out"}, {"Out"}, {"X"})};
          })
          .Doc("Out = max(X, 0)."));
  OpRegistry::Global().Register(
      OpSchema("relu_grad")
          .Input("Out")
          .Input(GradSlot("Out"))
          .Output(GradSlot("X"))
          .SetInferShape(InferGradFrom("Out"))
          .Doc("Gradient of relu: Out@GRAD where Out > 0, else 0."));
}

}  // namespace loom
