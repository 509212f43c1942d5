// elementwise_{add,sub,mul} with numpy broadcasting, scale, and sum.
#include "framework/ops/op_helpers.h"

namespace loom {
namespace {

Status InferBinary(InferShapeContext& ctx) {
  const TensorMeta& x = ctx.Input("X");
  const TensorMeta& y = ctx.Input("Y");
  if (x.dtype != y.dtype) {
    return InvalidArgument("X is ", DataTypeName(x.dtype), " but Y is ",
                           DataTypeName(y.dtype));
  }
  LOOM_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(x.shape, y.shape));
  ctx.SetOutput("Out", TensorMeta{x.dtype, out});
  return Status::OK();
}

Status InferBinaryGrad(InferShapeContext& ctx) {
  ctx.ShareMeta("X", GradSlot("X"));
  ctx.ShareMeta("Y", GradSlot("Y"));
  return Status::OK();
}

void RegisterBinary(const std::string& type, bool grad_needs_data,
                    const std::string& doc) {
  const std::string grad = type + "_grad";
  OpRegistry::Global().Register(
      OpSchema(type)
          .Input("X")
          .Input("Y")
          .Output("Out")
          .SetInferShape(InferBinary)
          .SetGradMaker([grad](const proto::OpDesc& fwd) {
            return std::vector<proto::OpDesc>{
                MakeGradOp(fwd, grad, {"X", "Y"}, {}, {"Out"}, {"X", "Y"})};
          })
          .Doc(doc));
  // add and sub gradients need only the shapes of X and Y.
  uint32_t xy_flags = grad_needs_data ? SlotSpec::kNone : SlotSpec::kNoBuffer;
  OpRegistry::Global().Register(
      OpSchema(grad)
          .Input("X", xy_flags)
          .Input("Y", xy_flags)
          .Input(GradSlot("Out"))
          .Output(GradSlot("X"), SlotSpec::kOptional)
          .Output(GradSlot("Y"), SlotSpec::kOptional)
          .SetInferShape(InferBinaryGrad)
          .Doc("Gradient of " + type + "; broadcast dims are summed."));
}

}  // namespace

void RegisterElementwiseOps() {
  RegisterBinary("elementwise_add", false, "Out = X + Y, numpy broadcasting.");
  RegisterBinary("elementwise_sub", false, "Out = X - Y, numpy broadcasting.");
  RegisterBinary("elementwise_mul", true, "Out = X * Y, numpy broadcasting.");

  OpRegistry::Global().Register(
      OpSchema("scale")
          .Input("X")
          .Output("Out")
          .Attr<float>("scale", 1.0f)
          .Attr<float>("bias", 0.0f)
          .SetInferShape(InferSameAsX)
          .SetGradMaker([](const proto::OpDesc& fwd) {
            // d(sX + b)/dX = s: the gradient is a scale op too.
            OpDescBuilder b("scale");
            b.Input("X", GradVarName(SlotVars(fwd.outputs(), "Out")[0]))
                .Output("Out", GradVarName(SlotVars(fwd.inputs(), "X")[0]))
                .RawAttr(*FindAttrOrDefault(fwd, "scale"))
                .Attr("bias", 0.0f);
            return std::vector<proto::OpDesc>{b.Build()};
          })
          .Doc("Out = scale * X + bias."));

  OpRegistry::Global().Register(
      OpSchema("sum")
          .Input("X", SlotSpec::kDuplicable)
          .Output("Out")
          .SetInferShape([](InferShapeContext& ctx) -> Status {
            const TensorMeta& first = ctx.Input("X", 0);
            for (int i = 1; i < ctx.InputCount("X"); ++i) {
              if (ctx.Input("X", i) != first) {
                return InvalidArgument("X[", i, "] is ",
                                       MetaToString(ctx.Input("X", i)),
                                       " but X[0] is ", MetaToString(first));
              }
            }
            ctx.SetOutput("Out", first);
            return Status::OK();
          })
          .SetGradMaker([](const proto::OpDesc& fwd) {
            std::vector<proto::OpDesc> grads;
            const std::string dout =
                GradVarName(SlotVars(fwd.outputs(), "Out")[0]);
            for (const auto& x : SlotVars(fwd.inputs(), "X")) {
              grads.push_back(OpDescBuilder("scale")
                                  .Input("X", dout)
                                  .Output("Out", GradVarName(x))
                                  .Attr("scale", 1.0f));
            }
            return grads;
          })
          .Doc("Out = X[0] + X[1] + ..., added in slot order so the result "
               "is reproducible. Autodiff uses it to accumulate gradients."));
}

}  // namespace loom
