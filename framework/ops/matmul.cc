// matmul: Out = alpha * op(X) @ op(Y) over the last two dims, and its
// gradient.
#include "framework/ops/op_helpers.h"

namespace loom {
namespace {

Status CheckFloatMatrix(const std::string& slot, const TensorMeta& m) {
  LOOM_RETURN_IF_ERROR(CheckComputeFloat(slot, m));
  if (m.shape.size() < 2) {
    return InvalidArgument(slot, " must have rank >= 2, but has shape ",
                           ShapeToString(m.shape));
  }
  return Status::OK();
}

// Out's meta from X, Y and the transposes.
StatusOr<TensorMeta> MatmulOutMeta(const InferShapeContext& ctx) {
  const TensorMeta& x = ctx.Input("X");
  const TensorMeta& y = ctx.Input("Y");
  LOOM_RETURN_IF_ERROR(CheckFloatMatrix("X", x));
  LOOM_RETURN_IF_ERROR(CheckFloatMatrix("Y", y));
  if (x.dtype != y.dtype) {
    return InvalidArgument("X is ", DataTypeName(x.dtype), " but Y is ", DataTypeName(y.dtype));
  }
  const bool tx = ctx.Attr<bool>("transpose_x");
  const bool ty = ctx.Attr<bool>("transpose_y");
  const size_t rx = x.shape.size();
  const size_t ry = y.shape.size();
  const int64_t m = tx ? x.shape[rx - 1] : x.shape[rx - 2];
  const int64_t kx = tx ? x.shape[rx - 2] : x.shape[rx - 1];
  const int64_t ky = ty ? y.shape[ry - 1] : y.shape[ry - 2];
  const int64_t n = ty ? y.shape[ry - 2] : y.shape[ry - 1];
  if (kx != ky) {
    return InvalidArgument("X has ", kx, " columns (after transpose) but Y has ",
                           ky, " rows: ", ShapeToString(x.shape), " @ ",
                           ShapeToString(y.shape));
  }
  Shape out(x.shape.begin(), x.shape.end() - 2);
  // A 2-D Y is shared by every batch of X; a batched Y must match X's batch
  // dims exactly (no broadcasting, which would need a reduction in the grad).
  if (ry > 2 && Shape(y.shape.begin(), y.shape.end() - 2) != out) {
    return InvalidArgument("batch dims of X and Y differ: ",
                           ShapeToString(x.shape), " @ ",
                           ShapeToString(y.shape),
                           " (Y must be 2-D or have X's batch dims)");
  }
  out.push_back(m);
  out.push_back(n);
  return TensorMeta{x.dtype, out};
}

Status InferMatmul(InferShapeContext& ctx) {
  LOOM_ASSIGN_OR_RETURN(TensorMeta out, MatmulOutMeta(ctx));
  ctx.SetOutput("Out", out);
  return Status::OK();
}

OpSchema& MatmulAttrs(OpSchema& s) {
  return s.Attr<bool>("transpose_x", false)
      .Attr<bool>("transpose_y", false)
      .Attr<float>("alpha", 1.0f)
      .AttrRange("alpha", -kFiniteMax, kFiniteMax);
}

}  // namespace

void RegisterMatmulOps() {
  OpSchema fwd("matmul");
  fwd.Input("X")
      .Input("Y")
      .Output("Out")
      .SetInferShape(InferMatmul)
      .SetGradMaker([](const proto::OpDesc& f) {
        return std::vector<proto::OpDesc>{
            MakeGradOp(f, "matmul_grad", {"X", "Y"}, {}, {"Out"}, {"X", "Y"})};
      })
      .Doc("Out = alpha * op(X) @ op(Y) over the last two dims; leading dims "
           "are batch dims, and a 2-D Y is shared by every batch.");
  OpRegistry::Global().Register(std::move(MatmulAttrs(fwd)));

  OpSchema grad("matmul_grad");
  grad.Input("X")
      .Input("Y")
      .Input(GradSlot("Out"))
      .Output(GradSlot("X"), SlotSpec::kOptional)
      .Output(GradSlot("Y"), SlotSpec::kOptional)
      .SetInferShape([](InferShapeContext& ctx) -> Status {
        // The incoming gradient has the forward output's meta.
        LOOM_ASSIGN_OR_RETURN(TensorMeta out, MatmulOutMeta(ctx));
        const TensorMeta& dout = ctx.Input(GradSlot("Out"));
        if (dout != out) {
          return InvalidArgument(GradSlot("Out"), " is ", MetaToString(dout), " but X @ Y is ",
                                 MetaToString(out));
        }
        ctx.ShareMeta("X", GradSlot("X"));
        ctx.ShareMeta("Y", GradSlot("Y"));
        return Status::OK();
      })
      // dX reads Y and dY reads X: a half that writes one gradient reads
      // the other operand's meta alone, so that split-backward's W half
      // does not keep a gathered weight alive, nor its B half an input.
      .SetReadsData([](const Op& op, const std::string& slot) {
        if (slot == "X") return op.HasOutput(GradSlot("Y"));
        if (slot == "Y") return op.HasOutput(GradSlot("X"));
        return true;
      })
      .Doc("Gradient of matmul; a shared 2-D Y's gradient is summed over the "
           "batch in one gemm.");
  OpRegistry::Global().Register(std::move(MatmulAttrs(grad)));
}

}  // namespace loom
