// dropout with a counter-based mask, and its gradient.
#include "framework/ops/op_helpers.h"

namespace loom {

void RegisterDropoutOps() {
  OpRegistry::Global().Register(
      OpSchema("dropout")
          .Input("X")
          .Output("Out")
          .Output("Mask")
          .Attr<float>("dropout_prob", 0.5f)
          .AttrRange("dropout_prob", 0, 1, false, /*hi_open=*/true)
          .Attr<int64_t>("seed", 0)
          .Attr<bool>("is_test", false)
          .SetInferShape([](InferShapeContext& ctx) -> Status {
            // (dropout_prob's range is the schema's: CheckOpSchema.)
            const TensorMeta& x = ctx.Input("X");
            if (!IsFloating(x.dtype)) {
              return InvalidArgument("X must be floating but is ",
                                     MetaToString(x));
            }
            ctx.ShareMeta("X", "Out");
            ctx.SetOutput("Mask", TensorMeta{proto::BOOL, x.shape});
            return Status::OK();
          })
          .SetGradMaker([](const proto::OpDesc& fwd) {
            return std::vector<proto::OpDesc>{
                MakeGradOp(fwd, "dropout_grad", {}, {"Mask"}, {"Out"}, {"X"})};
          })
          .Doc("Upscale-in-train dropout: Out = X * Mask / (1 - dropout_prob), "
               "Mask (bool) true where kept. Element i is kept iff "
               "splitmix64 of (seed, i), mapped to [0, 1), is >= "
               "dropout_prob, so the mask depends only on seed and position: "
               "no RNG state, and a fixed seed gives the same mask every run "
               "(vary the seed per layer and per step for fresh masks). "
               "is_test or dropout_prob = 0 passes X through, Mask all "
               "true."));
  OpRegistry::Global().Register(
      OpSchema("dropout_grad")
          .Input("Mask")
          .Input(GradSlot("Out"))
          .Output(GradSlot("X"))
          .Attr<float>("dropout_prob", 0.5f)
          .AttrRange("dropout_prob", 0, 1, false, /*hi_open=*/true)
          .Attr<int64_t>("seed", 0)
          .Attr<bool>("is_test", false)
          .SetInferShape([](InferShapeContext& ctx) -> Status {
            const TensorMeta& mask = ctx.Input("Mask");
            const TensorMeta& dout = ctx.Input(GradSlot("Out"));
            if (mask.dtype != proto::BOOL || mask.shape != dout.shape) {
              return InvalidArgument("Mask is ", MetaToString(mask),
                                     " but Out@GRAD is ", MetaToString(dout),
                                     "; Mask must be bool of the same shape");
            }
            ctx.ShareMeta(GradSlot("Out"), GradSlot("X"));
            return Status::OK();
          })
          .Doc("X@GRAD = Out@GRAD * Mask / (1 - dropout_prob); Out@GRAD "
               "itself under is_test."));
}

}  // namespace loom
