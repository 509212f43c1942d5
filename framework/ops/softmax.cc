// softmax (optionally causal), softmax_with_cross_entropy and its
// vocabulary-parallel form c_softmax_with_cross_entropy, and their gradients.
#include "framework/ops/op_helpers.h"

namespace loom {
namespace {

Status InferSoftmax(InferShapeContext& ctx) {
  const TensorMeta& x = ctx.Input("X");
  LOOM_RETURN_IF_ERROR(CheckComputeFloat("X", x));
  const int rank = static_cast<int>(x.shape.size());
  const int attr = ctx.Attr<int32_t>("axis");
  auto axis = NormalizeAxis(attr, rank);
  if (!axis.ok()) {
    return InvalidArgument("axis ", attr, " is out of range for X ",
                           ShapeToString(x.shape));
  }
  if (ctx.Attr<bool>("causal")) {
    if (rank < 2 || *axis != rank - 1) {
      return InvalidArgument("causal softmax needs X of rank >= 2 and axis "
                             "the last dim, but X is ",
                             ShapeToString(x.shape), " and axis is ", attr);
    }
    // With Sq > Sk the first queries would see no key at all.
    if (x.shape[rank - 2] > x.shape[rank - 1]) {
      return InvalidArgument("causal softmax needs X's last two dims "
                             "[Sq, Sk] with Sq <= Sk, but X is ",
                             ShapeToString(x.shape));
    }
  }
  ctx.SetOutput("Out", x);
  return Status::OK();
}

OpSchema& SoftmaxAttrs(OpSchema& s) {
  return s.Attr<int32_t>("axis", -1).Attr<bool>("causal", false);
}

Status InferCrossEntropy(InferShapeContext& ctx) {
  const TensorMeta& logits = ctx.Input("Logits");
  const TensorMeta& label = ctx.Input("Label");
  if (logits.dtype != proto::FP32 || logits.shape.empty()) {
    return InvalidArgument("Logits must be fp32 of rank >= 1, but is ",
                           MetaToString(logits));
  }
  const Shape rows(logits.shape.begin(), logits.shape.end() - 1);
  if (label.dtype != proto::INT64 || label.shape != rows) {
    return InvalidArgument("Label is ", MetaToString(label), " but Logits ",
                           ShapeToString(logits.shape), " needs ",
                           MetaToString(TensorMeta{proto::INT64, rows}));
  }
  ctx.SetOutput("Softmax", logits);
  ctx.SetOutput("Loss", TensorMeta{proto::FP32, rows});
  return Status::OK();
}

// nranks >= 1 and rank in [0, nranks).
Status CheckRanks(const InferShapeContext& ctx) {
  const int nranks = ctx.Attr<int32_t>("nranks");
  if (nranks < 1) {
    return InvalidArgument("attribute nranks is ", nranks, ", must be >= 1");
  }
  const int rank = ctx.Attr<int32_t>("rank");
  if (rank < 0 || rank >= nranks) {
    return InvalidArgument("attribute rank ", rank, " is out of range [0, ",
                           nranks, ") of attribute nranks");
  }
  return Status::OK();
}

OpSchema& VocabParallelAttrs(OpSchema& s) {
  return s.Attr<int32_t>("ring_id", 0)
      .RequiredAttr<int32_t>("nranks")
      .RequiredAttr<int32_t>("rank")
      .Attr<int32_t>("ignore_index", -100);
}

}  // namespace

void RegisterSoftmaxOps() {
  OpSchema fwd("softmax");
  fwd.Input("X")
      .Output("Out")
      .SetInferShape(InferSoftmax)
      .SetGradMaker([](const proto::OpDesc& f) {
        return std::vector<proto::OpDesc>{
            MakeGradOp(f, "softmax_grad", {}, {"Out"}, {"Out"}, {"X"})};
      })
      .Doc("Softmax along `axis`; `causal` masks key k > q + Sk - Sq of the "
           "last two dims [Sq, Sk] to probability 0.");
  OpRegistry::Global().Register(std::move(SoftmaxAttrs(fwd)));

  OpSchema grad("softmax_grad");
  grad.Input("Out")
      .Input(GradSlot("Out"))
      .Output(GradSlot("X"))
      .SetInferShape([](InferShapeContext& ctx) {
        ctx.ShareMeta("Out", GradSlot("X"));
        return Status::OK();
      })
      .Doc("Gradient of softmax: Out * (Out@GRAD - sum(Out@GRAD * Out)).");
  OpRegistry::Global().Register(std::move(SoftmaxAttrs(grad)));

  OpRegistry::Global().Register(
      OpSchema("softmax_with_cross_entropy")
          .Input("Logits")
          .Input("Label", SlotSpec::kNoGrad)
          // Saved for the gradient, which flows from Loss only.
          .Output("Softmax", SlotSpec::kNoGrad)
          .Output("Loss")
          .Attr<int32_t>("ignore_index", -100)
          .SetInferShape(InferCrossEntropy)
          .SetGradMaker([](const proto::OpDesc& f) {
            return std::vector<proto::OpDesc>{
                MakeGradOp(f, "softmax_with_cross_entropy_grad", {"Label"},
                           {"Softmax"}, {"Loss"}, {"Logits"})};
          })
          .Doc("Loss = -log softmax(Logits)[Label] over the last dim; rows "
               "labelled ignore_index get loss 0."));
  OpRegistry::Global().Register(
      OpSchema("softmax_with_cross_entropy_grad")
          .Input("Softmax")
          .Input("Label", SlotSpec::kNoGrad)
          .Input(GradSlot("Loss"))
          .Output(GradSlot("Logits"))
          .Attr<int32_t>("ignore_index", -100)
          .SetInferShape([](InferShapeContext& ctx) {
            ctx.ShareMeta("Softmax", GradSlot("Logits"));
            return Status::OK();
          })
          .Doc("Gradient of softmax_with_cross_entropy: "
               "Loss@GRAD * (Softmax - onehot(Label))."));

  OpSchema c_fwd("c_softmax_with_cross_entropy");
  c_fwd.Input("Logits")
      .Input("Label", SlotSpec::kNoGrad)
      .Output("Softmax", SlotSpec::kNoGrad)
      .Output("Loss")
      .SetInferShape([](InferShapeContext& ctx) -> Status {
        LOOM_RETURN_IF_ERROR(CheckRanks(ctx));
        return InferCrossEntropy(ctx);
      })
      .SetGradMaker([](const proto::OpDesc& f) {
        return std::vector<proto::OpDesc>{
            MakeGradOp(f, "c_softmax_with_cross_entropy_grad", {"Label"},
                       {"Softmax"}, {"Loss"}, {"Logits"})};
      })
      .SetCommunication(CommCall::kAllReduce)
      .ComputesAroundCall()
      .Doc("Vocabulary-parallel softmax_with_cross_entropy (Megatron's "
           "vocab_parallel_cross_entropy): Logits [..., V_local] are global "
           "classes [rank * V_local, (rank + 1) * V_local) of nranks shards; "
           "Label holds global classes. Loss = -log softmax(all logits)"
           "[Label], the same on every rank; Softmax is this rank's shard of "
           "the global softmax. Rows labelled ignore_index get loss 0. Needs "
           "three allreduces over ring_id (max of the row maxima, sum of the "
           "exps, the target logit); the CPU kernel runs nranks 1 only.");
  OpRegistry::Global().Register(std::move(VocabParallelAttrs(c_fwd)));

  OpSchema c_grad("c_softmax_with_cross_entropy_grad");
  c_grad.Input("Softmax")
      .Input("Label", SlotSpec::kNoGrad)
      .Input(GradSlot("Loss"))
      .Output(GradSlot("Logits"))
      .SetInferShape([](InferShapeContext& ctx) -> Status {
        LOOM_RETURN_IF_ERROR(CheckRanks(ctx));
        const TensorMeta& sm = ctx.Input("Softmax");
        if (sm.dtype != proto::FP32 || sm.shape.empty()) {
          return InvalidArgument("Softmax must be fp32 of rank >= 1, but is ",
                                 MetaToString(sm));
        }
        const Shape rows(sm.shape.begin(), sm.shape.end() - 1);
        const TensorMeta& label = ctx.Input("Label");
        if (label.dtype != proto::INT64 || label.shape != rows) {
          return InvalidArgument("Label is ", MetaToString(label),
                                 " but Softmax ", ShapeToString(sm.shape),
                                 " needs ",
                                 MetaToString(TensorMeta{proto::INT64, rows}));
        }
        const TensorMeta& dloss = ctx.Input(GradSlot("Loss"));
        if (dloss != TensorMeta{proto::FP32, rows}) {
          return InvalidArgument("Loss@GRAD is ", MetaToString(dloss),
                                 " but Softmax ", ShapeToString(sm.shape),
                                 " needs ",
                                 MetaToString(TensorMeta{proto::FP32, rows}));
        }
        ctx.ShareMeta("Softmax", GradSlot("Logits"));
        return Status::OK();
      })
      .Doc("Gradient of c_softmax_with_cross_entropy, local to the rank: "
           "Loss@GRAD * (Softmax - onehot(Label - rank * V_local)), the "
           "onehot only when Label falls in this rank's shard; rows "
           "labelled ignore_index get zeros.");
  OpRegistry::Global().Register(std::move(VocabParallelAttrs(c_grad)));
}

}  // namespace loom
