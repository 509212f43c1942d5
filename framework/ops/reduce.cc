// reduce_sum and reduce_mean over chosen dims, and their gradients.
#include <algorithm>

#include "framework/ops/op_helpers.h"

namespace loom {
namespace {

Status InferReduce(InferShapeContext& ctx) {
  const TensorMeta& x = ctx.Input("X");
  LOOM_ASSIGN_OR_RETURN(
      auto dims, NormalizeReduceDims(ctx.Attr<std::vector<int32_t>>("dims"),
                                     ctx.Attr<bool>("reduce_all"),
                                     static_cast<int>(x.shape.size())));
  bool keep = ctx.Attr<bool>("keep_dim");
  Shape out;
  for (int i = 0; i < static_cast<int>(x.shape.size()); ++i) {
    bool reduced = std::find(dims.begin(), dims.end(), i) != dims.end();
    if (!reduced) {
      out.push_back(x.shape[i]);
    } else if (keep) {
      out.push_back(1);
    }
  }
  ctx.SetOutput("Out", TensorMeta{x.dtype, out});
  return Status::OK();
}

void RegisterReduce(const std::string& type, const std::string& doc) {
  const std::string grad = type + "_grad";
  OpRegistry::Global().Register(
      OpSchema(type)
          .Input("X")
          .Output("Out")
          .Attr<std::vector<int32_t>>("dims", {})
          .Attr<bool>("keep_dim", false)
          .Attr<bool>("reduce_all", false)
          .SetInferShape(InferReduce)
          .SetGradMaker([grad](const proto::OpDesc& fwd) {
            return std::vector<proto::OpDesc>{
                MakeGradOp(fwd, grad, {"X"}, {}, {"Out"}, {"X"})};
          })
          .Doc(doc));
  OpRegistry::Global().Register(
      OpSchema(grad)
          .Input("X", SlotSpec::kNoBuffer)
          .Input(GradSlot("Out"))
          .Output(GradSlot("X"))
          .Attr<std::vector<int32_t>>("dims", {})
          .Attr<bool>("keep_dim", false)
          .Attr<bool>("reduce_all", false)
          .SetInferShape([](InferShapeContext& ctx) {
            ctx.ShareMeta("X", GradSlot("X"));
            return Status::OK();
          })
          .Doc("Broadcasts Out@GRAD back over the reduced dims."));
}

}  // namespace

void RegisterReduceOps() {
  RegisterReduce("reduce_sum",
                 "Sum over `dims` (or all dims), in a fixed order.");
  RegisterReduce("reduce_mean", "Mean over `dims` (or all dims).");
}

}  // namespace loom
