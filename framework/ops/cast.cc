// cast between the floating dtypes kernels compute in (fp32, bf16, fp16),
// the op the AMP pass inserts where precisions meet. Its gradient is the
// cast back.
#include "framework/ops/op_helpers.h"

namespace loom {
namespace {

StatusOr<DataType> CastDtypeAttr(const InferShapeContext& ctx, const char* name) {
  const int v = ctx.Attr<int32_t>(name);
  if (!proto::DataType_IsValid(v) || !IsComputeFloat(static_cast<DataType>(v))) {
    return InvalidArgument("attribute ", name, " ", v,
                           " is not fp32 (0), fp16 (1) or bf16 (2)");
  }
  return static_cast<DataType>(v);
}

Status InferCast(InferShapeContext& ctx) {
  LOOM_ASSIGN_OR_RETURN(DataType in, CastDtypeAttr(ctx, "in_dtype"));
  LOOM_ASSIGN_OR_RETURN(DataType out, CastDtypeAttr(ctx, "out_dtype"));
  const TensorMeta& x = ctx.Input("X");
  if (x.dtype != in) {
    return InvalidArgument("X is ", DataTypeName(x.dtype), " but in_dtype is ",
                           DataTypeName(in));
  }
  ctx.SetOutput("Out", TensorMeta{out, x.shape});
  return Status::OK();
}

}  // namespace

void RegisterCastOps() {
  OpRegistry::Global().Register(
      OpSchema("cast")
          .Input("X")
          .Output("Out")
          .RequiredAttr<int32_t>("in_dtype")
          .RequiredAttr<int32_t>("out_dtype")
          .SetInferShape(InferCast)
          .SetGradMaker([](const proto::OpDesc& fwd) {
            OpDescBuilder b("cast");
            b.Input("X", GradVarName(SlotVars(fwd.outputs(), "Out")[0]))
                .Output("Out", GradVarName(SlotVars(fwd.inputs(), "X")[0]))
                .Attr("in_dtype", FindAttrOrDefault(fwd, "out_dtype")->i())
                .Attr("out_dtype", FindAttrOrDefault(fwd, "in_dtype")->i());
            return std::vector<proto::OpDesc>{b.Build()};
          })
          .Doc("Out = X in out_dtype, rounded to nearest even where it narrows."));
}

}  // namespace loom
