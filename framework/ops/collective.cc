// Communication ops. Communicators run them; the framework only knows their
// shapes and gradients. The allreduce/identity pair is Megatron's g/f for
// tensor parallelism: each is the other's gradient. allreduce takes several
// tensors at once (a bucket); its gradient is one identity per tensor.
#include "framework/ops/op_helpers.h"
#include "framework/wire_dtype.h"

namespace loom {
namespace {

// A grad maker that emits one `type` op from Out@GRAD to X@GRAD, carrying
// ring_id, nranks (when the forward op has it), axis (when set) and any
// `extra` attrs.
GradMakerFn MirrorGrad(const std::string& type,
                       std::vector<proto::Attr> extra = {}) {
  return [type, extra](const proto::OpDesc& fwd) {
    OpDescBuilder b(type);
    b.Input("X", GradVarName(SlotVars(fwd.outputs(), "Out")[0]))
        .Output("Out", GradVarName(SlotVars(fwd.inputs(), "X")[0]))
        .RawAttr(*FindAttrOrDefault(fwd, "ring_id"));
    if (const proto::Attr* n = FindAttrOrDefault(fwd, "nranks")) b.RawAttr(*n);
    // Only when set, so that the grads of dim-0 collectives keep their
    // descs (and signatures) as they were.
    for (const proto::Attr& a : fwd.attrs()) {
      if (a.name() == "axis") b.RawAttr(a);
    }
    for (const auto& a : extra) b.RawAttr(a);
    return std::vector<proto::OpDesc>{b.Build()};
  };
}

// allreduce's gradient: one identity per (X[i], Out[i]) pair, from
// Out[i]@GRAD to X[i]@GRAD, carrying ring_id.
std::vector<proto::OpDesc> AllreduceGrad(const proto::OpDesc& fwd) {
  const std::vector<std::string> xs = SlotVars(fwd.inputs(), "X");
  const std::vector<std::string> outs = SlotVars(fwd.outputs(), "Out");
  std::vector<proto::OpDesc> grads;
  for (size_t i = 0; i < xs.size() && i < outs.size(); ++i) {
    if (xs[i].empty() || outs[i].empty()) continue;
    grads.push_back(OpDescBuilder("identity")
                        .Input("X", GradVarName(outs[i]))
                        .Output("Out", GradVarName(xs[i]))
                        .RawAttr(*FindAttrOrDefault(fwd, "ring_id"))
                        .Build());
  }
  return grads;
}

StatusOr<int> NRanks(const InferShapeContext& ctx) {
  const int n = ctx.Attr<int32_t>("nranks");
  if (n < 1)
    return InvalidArgument("attribute nranks is ", n, ", must be >= 1");
  return n;
}

// Attribute axis of an allgather or reduce_scatter: a dim of X.
StatusOr<int> Axis(const InferShapeContext& ctx) {
  const int axis = ctx.Attr<int32_t>("axis");
  const Shape& x = ctx.Input("X").shape;
  if (axis < 0 || axis >= static_cast<int>(x.size())) {
    return InvalidArgument("attribute axis ", axis, " is not a dim of X ", ShapeToString(x));
  }
  return axis;
}

Status CheckPeer(const InferShapeContext& ctx) {
  const int peer = ctx.Attr<int32_t>("peer");
  if (peer < 0) return InvalidArgument("attribute peer is ", peer);
  return Status::OK();
}

// Attribute wire_dtype names a dtype every X can be reduced in, and a fetch
// (a gather by sum, which must be exact) moves its data as it is.
Status CheckWireDtype(InferShapeContext& ctx, bool fetch) {
  const std::string wire = ctx.Attr<std::string>(kWireDtypeAttr);
  if (wire.empty()) return Status::OK();
  for (int i = 0; i < ctx.InputCount("X"); ++i) {
    const DataType held = ctx.Input("X", i).dtype;
    StatusOr<DataType> parsed = ParseWireDtype(wire, held);
    if (!parsed.ok()) return InvalidArgument("attribute wire_dtype: ", parsed.status().message());
    if (fetch && *parsed != held) {
      return InvalidArgument("a fetch (fetch_parts) moves its data exactly, not in wire_dtype ",
                             wire);
    }
  }
  return Status::OK();
}

}  // namespace

void RegisterCollectiveOps() {
  OpRegistry::Global().Register(
      OpSchema("allreduce")
          .Input("X", SlotSpec::kDuplicable)
          .Output("Out", SlotSpec::kDuplicable)
          .Attr<int32_t>("ring_id", 0)
          .Attr<std::string>("reduce_op", "sum")
          // A fetch by all-reduce (DeepSpeed's, for sharded parameters):
          // X is one 1-D var of fetch_parts equal parts, of which only this
          // rank's (its place on the ring) is current; the others are zeroed
          // first, so that the sum is every rank's part, in place.
          .Attr<int32_t>("fetch_parts", 0)
          // A fetch's rank part held apart (ZeRO-3, whose X is a zeroed
          // temporary): copied into the rank's place of X before the sum.
          .Input("Part", SlotSpec::kOptional)
          // Gradients reduced in a narrower dtype than they are held in
          // (framework/wire_dtype.h); "" moves them as they are.
          .Attr<std::string>(kWireDtypeAttr, "")
          .SetInferShape([](InferShapeContext& ctx) -> Status {
            const std::string op = ctx.Attr<std::string>("reduce_op");
            if (op != "sum" && op != "avg" && op != "max") {
              return InvalidArgument("attribute reduce_op '", op,
                                     "' is not one of sum, avg, max");
            }
            const int parts = ctx.Attr<int32_t>("fetch_parts");
            if (parts < 0) return InvalidArgument("attribute fetch_parts is negative");
            LOOM_RETURN_IF_ERROR(CheckWireDtype(ctx, parts > 0));
            if (parts > 0) {
              const TensorMeta& x = ctx.Input("X", 0);
              if (ctx.InputCount("X") != 1 || op != "sum" || x.shape.size() != 1 ||
                  x.shape[0] % parts != 0) {
                return InvalidArgument("a fetch (fetch_parts ", parts, ") sums one 1-D var "
                                       "of equal parts, got ", ctx.InputCount("X"), " vars, ",
                                       "reduce_op ", op, ", X ", ShapeToString(x.shape));
              }
            }
            if (ctx.InputCount("Part") > 0) {
              const TensorMeta& x = ctx.Input("X", 0);
              const TensorMeta& part = ctx.Input("Part");
              if (parts == 0 || part.dtype != x.dtype ||
                  NumElements(part.shape) * parts != NumElements(x.shape)) {
                return InvalidArgument("Part ", MetaToString(part), " must be one of the ",
                                       parts, " fetch_parts of X ", MetaToString(x));
              }
            }
            const int n = ctx.InputCount("X");
            if (ctx.OutputCount("Out") != n) {
              return InvalidArgument(
                  "input X holds ", n, " vars but output Out holds ",
                  ctx.OutputCount("Out"), "; they must match");
            }
            for (int i = 0; i < n; ++i) ctx.ShareMeta("X", "Out", i);
            return Status::OK();
          })
          .SetGradMaker(AllreduceGrad)
          .SetCommunication(CommCall::kAllReduce)
          .Doc("Out[i] = X[i] reduced over the ranks of ring_id (sum, avg or "
               "max), for every i: X and Out hold the same number of vars, "
               "so one op can reduce a bucket of tensors. Its gradient is one "
               "identity per pair: this assumes Out@GRAD is the same on every "
               "rank, as after tensor-parallel row layers."));
  OpRegistry::Global().Register(
      OpSchema("identity")
          .Input("X")
          .Output("Out")
          .Attr<int32_t>("ring_id", 0)
          .SetInferShape(InferSameAsX)
          .SetGradMaker(MirrorGrad("allreduce",
                                   {MakeAttr<std::string>("reduce_op", "sum")}))
          .MarkCommunicationBoundary()
          .ViewOf("X")
          .Doc("Out = X, as a view of X's data (no copy). Marks where a "
               "replicated value enters rank-local compute; its gradient is a "
               "sum allreduce over ring_id."));
  OpRegistry::Global().Register(
      OpSchema("allgather")
          .Input("X")
          .Output("Out")
          .Attr<int32_t>("ring_id", 0)
          .RequiredAttr<int32_t>("nranks")
          // Sequence parallelism gathers [B, S, H] activations along dim 1.
          .Attr<int32_t>("axis", 0)
          .SetInferShape([](InferShapeContext& ctx) -> Status {
            LOOM_ASSIGN_OR_RETURN(int n, NRanks(ctx));
            LOOM_ASSIGN_OR_RETURN(int axis, Axis(ctx));
            TensorMeta out = ctx.Input("X");
            out.shape[axis] *= n;
            ctx.SetOutput("Out", out);
            return Status::OK();
          })
          .SetGradMaker(MirrorGrad("reduce_scatter"))
          .SetCommunication(CommCall::kAllGather)
          .Doc("Out = the X of every rank, joined along dim `axis` in rank "
               "order."));
  OpRegistry::Global().Register(
      OpSchema("reduce_scatter")
          .Input("X")
          // The vars whose bytes X's buffer holds (a bucket's gradients in
          // a flat buffer): named so that the op is ordered after their
          // writers and before their next writers; their data is X's.
          .Input("Members", SlotSpec::kDuplicable | SlotSpec::kOptional | SlotSpec::kNoBuffer |
                                SlotSpec::kNoGrad)
          .Output("Out")
          .Attr<int32_t>("ring_id", 0)
          .RequiredAttr<int32_t>("nranks")
          .Attr<std::string>("reduce_op", "sum")
          .Attr<std::string>(kWireDtypeAttr, "")
          .Attr<int32_t>("axis", 0)
          .SetInferShape([](InferShapeContext& ctx) -> Status {
            const std::string op = ctx.Attr<std::string>("reduce_op");
            if (op != "sum" && op != "avg") {
              return InvalidArgument("attribute reduce_op '", op, "' is not one of sum, avg");
            }
            LOOM_RETURN_IF_ERROR(CheckWireDtype(ctx, /*fetch=*/false));
            LOOM_ASSIGN_OR_RETURN(int n, NRanks(ctx));
            LOOM_ASSIGN_OR_RETURN(int axis, Axis(ctx));
            // A flat buffer's shard is a contiguous range: only dim 0 is.
            if (axis != 0 && ctx.InputCount("Members") > 0) {
              return InvalidArgument("attribute axis is ", axis,
                                     "; a reduce_scatter of a flat buffer (Members) splits dim 0");
            }
            TensorMeta out = ctx.Input("X");
            if (out.shape[axis] % n != 0) {
              return InvalidArgument("dim ", axis, " of X ", ShapeToString(out.shape),
                                     " is not divisible by attribute nranks ", n);
            }
            out.shape[axis] /= n;
            ctx.SetOutput("Out", out);
            return Status::OK();
          })
          .SetGradMaker(MirrorGrad("allgather"))
          .SetCommunication(CommCall::kReduceScatter)
          .Doc("Sums (or averages, reduce_op) X over the ranks and gives rank r "
               "the r-th of nranks equal parts along dim `axis`. Out may be that "
               "part of X itself (a shard of a flat buffer, axis 0): the reduction "
               "is in place."));
  OpRegistry::Global().Register(
      OpSchema("broadcast")
          .Input("X")
          .Output("Out")
          .Attr<int32_t>("ring_id", 0)
          .Attr<int32_t>("root", 0)
          .SetInferShape(InferSameAsX)
          .SetCommunication(CommCall::kBroadcast)
          .Doc("Out = X of rank root, on every rank."));
  OpRegistry::Global().Register(
      OpSchema("send")
          .Input("X")
          .Attr<int32_t>("ring_id", 0)
          .RequiredAttr<int32_t>("peer")
          .SetInferShape(CheckPeer)
          .SetCommunication(CommCall::kSend)
          .Doc("Sends X to rank peer. No outputs: passes must not drop it "
               "as dead code."));
  OpRegistry::Global().Register(
      OpSchema("recv")
          .Output("Out")
          .Attr<int32_t>("ring_id", 0)
          .RequiredAttr<int32_t>("peer")
          .RequiredAttr<std::vector<int64_t>>("out_shape")
          .Attr<int32_t>("dtype", proto::FP32)
          .SetInferShape([](InferShapeContext& ctx) -> Status {
            LOOM_RETURN_IF_ERROR(CheckPeer(ctx));
            auto shape = ctx.Attr<std::vector<int64_t>>("out_shape");
            for (int64_t d : shape) {
              if (d < 0) {
                return InvalidArgument("attribute out_shape ",
                                       ShapeToString(shape),
                                       " has a negative dimension");
              }
            }
            const int dtype = ctx.Attr<int32_t>("dtype");
            if (!proto::DataType_IsValid(dtype)) {
              return InvalidArgument("attribute dtype ", dtype,
                                     " is not a data type");
            }
            ctx.SetOutput("Out",
                          TensorMeta{static_cast<DataType>(dtype), shape});
            return Status::OK();
          })
          .SetCommunication(CommCall::kRecv)
          .Doc("Out = what rank peer sends, of out_shape and dtype."));
}

}  // namespace loom
