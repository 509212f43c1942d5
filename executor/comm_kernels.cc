#include "executor/comm_kernels.h"

#include <cstring>
#include <functional>

#include "executor/cpu/cpu_device.h"
#include "executor/kernels/cpu/vocab_parallel_cross_entropy.h"
#include "framework/low_precision.h"
#include "framework/wire_dtype.h"
#ifdef LOOM_WITH_CUDA
#include "executor/kernels/cuda/cuda_kernel_helpers.h"
#include "executor/kernels/cuda/vocab_parallel_cross_entropy.h"
#endif

namespace loom {
namespace {

// Copies and fills go through the device the tensors live on (the CPU
// outside a rank executor), ordered on the kernel's stream.
Device* DeviceOf(const KernelContext& ctx) {
  return ctx.device() != nullptr ? ctx.device() : CpuDevice::Default();
}

Status CopyTensor(const KernelContext& ctx, const Tensor& in, Tensor* out) {
  if (in.raw_data() == out->raw_data()) return Status::OK();
  if (in.bytes() != out->bytes()) {
    return Internal("copies ", MetaToString(in.meta()), " into ", MetaToString(out->meta()));
  }
  return DeviceOf(ctx)->Copy(out->raw_data(), in.raw_data(), in.bytes(), ctx.stream());
}

// Communicators are host-synchronous (communicator.h): on a device whose
// streams run behind their host thread, the stream's work so far (the
// inputs, and earlier users of the outputs' memory) must be complete before
// the call. An NCCL communicator runs on its own stream and returns once
// the outputs are, so later work on any stream may use them.
// The vocabulary-parallel cross entropy on the kernel's device, with
// `reduce` between its steps.
Status VocabParallelCrossEntropyOn(const KernelContext& ctx, const ShardReduceFn& reduce) {
#ifdef LOOM_WITH_CUDA
  if (DeviceOf(ctx)->type() == DeviceType::kCuda) {
    return VocabParallelCrossEntropyCuda(ctx, reduce);
  }
#endif
  return VocabParallelCrossEntropy(ctx, reduce);
}

Status InputsReady(const KernelContext& ctx) {
  return ctx.stream() != nullptr ? ctx.stream()->Synchronize() : Status::OK();
}

StatusOr<ReduceOp> ParseReduceOp(const std::string& name) {
  if (name == "sum") return ReduceOp::kSum;
  if (name == "avg") return ReduceOp::kAvg;
  if (name == "max") return ReduceOp::kMax;
  return InvalidArgument("unknown reduce_op '", name, "'");
}

// n elements of `src` (fp32, bf16 or fp16) converted into `dst`, one of
// them fp32, on the kernel's device, ordered on its stream.
Status Convert(const KernelContext& ctx, DataType from, const void* src, DataType to, void* dst,
               int64_t n) {
#ifdef LOOM_WITH_CUDA
  if (DeviceOf(ctx)->type() == DeviceType::kCuda) {
    if (!cuda::LaunchCast(FloatTypeOf(from), src, FloatTypeOf(to), dst, n, NativeStream(ctx))) {
      return Internal("no CUDA conversion from ", DataTypeName(from), " to ", DataTypeName(to));
    }
    return LastLaunchStatus("wire dtype conversion");
  }
#endif
  if (to == proto::FP32) {
    WidenToFloat(from, src, n, static_cast<float*>(dst));
  } else {
    NarrowFromFloat(to, static_cast<const float*>(src), n, dst);
  }
  return Status::OK();
}

// `reduce` over the members of `held` (in order) narrowed to `wire`, back
// to back in one scratch tensor; the results are widened back into them.
Status ReduceInWire(const KernelContext& ctx, const std::vector<Tensor*>& held, DataType wire,
                    const std::function<Status(Tensor*)>& reduce) {
  int64_t total = 0;
  for (const Tensor* t : held) total += t->numel();
  Tensor scratch;
  LOOM_RETURN_IF_ERROR(scratch.Resize(TensorMeta{wire, {total}}, DeviceOf(ctx), ctx.stream()));
  auto* base = static_cast<uint8_t*>(scratch.raw_data());
  int64_t at = 0;
  for (const Tensor* t : held) {
    LOOM_RETURN_IF_ERROR(
        Convert(ctx, t->dtype(), t->raw_data(), wire, base + at * SizeOf(wire), t->numel()));
    at += t->numel();
  }
  LOOM_RETURN_IF_ERROR(InputsReady(ctx));
  LOOM_RETURN_IF_ERROR(reduce(&scratch));
  at = 0;
  for (Tensor* t : held) {
    LOOM_RETURN_IF_ERROR(
        Convert(ctx, wire, base + at * SizeOf(wire), t->dtype(), t->raw_data(), t->numel()));
    at += t->numel();
  }
  return Status::OK();
}

// The op's wire dtype for data held in `held` (framework/wire_dtype.h).
StatusOr<DataType> WireDtype(const KernelContext& ctx, DataType held) {
  return ParseWireDtype(ctx.Attr<std::string>(kWireDtypeAttr), held);
}

Status AllReduceKernel(const KernelContext& ctx, Communicator* comm) {
  LOOM_ASSIGN_OR_RETURN(ReduceOp op, ParseReduceOp(ctx.Attr<std::string>("reduce_op")));
  std::vector<Tensor*> bucket;
  for (int i = 0; i < ctx.OutputCount("Out"); ++i) {
    Tensor* out = ctx.Output("Out", i);
    LOOM_RETURN_IF_ERROR(CopyTensor(ctx, ctx.Input("X", i), out));
    bucket.push_back(out);
  }
  if (!bucket.empty()) {
    LOOM_ASSIGN_OR_RETURN(const DataType wire, WireDtype(ctx, bucket[0]->dtype()));
    if (wire != bucket[0]->dtype()) {
      return ReduceInWire(ctx, bucket, wire, [&](Tensor* scratch) {
        return comm->AllReduce({scratch}, op);
      });
    }
  }
  // A fetch: every part but this rank's is zeroed, so the sum gathers.
  const int parts = ctx.Attr<int32_t>("fetch_parts");
  if (parts > 0) {
    if (parts != comm->size() || bucket.size() != 1) {
      return InvalidArgument("a fetch of ", parts, " parts on a ring of ", comm->size());
    }
    auto* bytes = static_cast<uint8_t*>(bucket[0]->raw_data());
    const int64_t part = bucket[0]->bytes() / parts;
    Device* device = DeviceOf(ctx);
    if (ctx.HasInput("Part")) {
      const Tensor& mine = ctx.Input("Part");
      if (mine.bytes() != part) {
        return InvalidArgument("Part holds ", mine.bytes(), " bytes, not a part's ", part);
      }
      LOOM_RETURN_IF_ERROR(
          device->Copy(bytes + comm->rank() * part, mine.raw_data(), part, ctx.stream()));
    }
    LOOM_RETURN_IF_ERROR(device->Memset(bytes, 0, comm->rank() * part, ctx.stream()));
    LOOM_RETURN_IF_ERROR(device->Memset(bytes + (comm->rank() + 1) * part, 0,
                                        (parts - comm->rank() - 1) * part, ctx.stream()));
  }
  LOOM_RETURN_IF_ERROR(InputsReady(ctx));
  return comm->AllReduce(bucket, op);
}

// A collective along attribute axis moves a rank's part as `outer` blocks
// of `bytes`: the dims before axis, and the rest. The communicators work
// along dim 0; with outer 1 the data is laid out that way already.
struct AxisBlocks {
  int64_t outer = 1;
  int64_t bytes = 0;
};

// The blocks of `part`, one rank's share of `whole` (n of them along axis).
StatusOr<AxisBlocks> BlocksOf(const KernelContext& ctx, const Tensor& part, const Tensor& whole,
                              int64_t n) {
  const int axis = ctx.Attr<int32_t>("axis");
  if (axis < 0 || axis >= part.rank() || !part.initialized() || !whole.initialized() ||
      part.dtype() != whole.dtype() || part.numel() * n != whole.numel()) {
    return Internal("a collective along axis ", axis, " of ", MetaToString(part.meta()),
                    " and ", MetaToString(whole.meta()), " over ", n, " ranks");
  }
  AxisBlocks b;
  for (int d = 0; d < axis; ++d) b.outer *= part.dim(d);
  b.bytes = b.outer > 0 ? part.bytes() / b.outer : 0;
  return b;
}

// `part`'s meta with dim 0 times n: the whole as the communicators lay it out.
TensorMeta Stacked(const Tensor& part, int n) {
  TensorMeta meta = part.meta();
  meta.shape[0] *= n;
  return meta;
}

// Copies the n x outer blocks of `src` into `dst`, from rank-major order (the
// communicators') to outer-major (along axis), or back.
Status Restack(const KernelContext& ctx, const AxisBlocks& b, int n, const void* src, void* dst,
               bool to_axis) {
  const auto* from = static_cast<const uint8_t*>(src);
  auto* to = static_cast<uint8_t*>(dst);
  for (int64_t o = 0; o < b.outer; ++o) {
    for (int64_t r = 0; r < n; ++r) {
      const int64_t stacked = (r * b.outer + o) * b.bytes, joined = (o * n + r) * b.bytes;
      LOOM_RETURN_IF_ERROR(DeviceOf(ctx)->Copy(to + (to_axis ? joined : stacked),
                                               from + (to_axis ? stacked : joined), b.bytes,
                                               ctx.stream()));
    }
  }
  return Status::OK();
}

// Along an axis with dims before it, X is gathered rank-major into a
// scratch, whose blocks then interleave into Out.
Status AllGatherKernel(const KernelContext& ctx, Communicator* comm) {
  const Tensor& in = ctx.Input("X");
  Tensor* out = ctx.Output("Out");
  if (ctx.Attr<int32_t>("axis") == 0) {
    LOOM_RETURN_IF_ERROR(InputsReady(ctx));
    return comm->AllGather(in, out);
  }
  LOOM_ASSIGN_OR_RETURN(const AxisBlocks b, BlocksOf(ctx, in, *out, comm->size()));
  const TensorMeta stacked = Stacked(in, comm->size());
  Tensor scratch;
  if (b.outer == 1) {
    scratch = out->View(0, stacked.shape);  // Out's bytes, as the communicator sees them
  } else {
    LOOM_RETURN_IF_ERROR(scratch.Resize(stacked, DeviceOf(ctx), ctx.stream()));
  }
  LOOM_RETURN_IF_ERROR(InputsReady(ctx));
  LOOM_RETURN_IF_ERROR(comm->AllGather(in, &scratch));
  if (b.outer == 1) return Status::OK();
  return Restack(ctx, b, comm->size(), scratch.raw_data(), out->raw_data(), /*to_axis=*/true);
}

// In a narrower wire dtype, `in` goes through the scratch (ReduceInWire),
// whose part this rank keeps is widened into Out.
Status ReduceScatterKernel(const KernelContext& ctx, Communicator* comm, const Tensor& in) {
  LOOM_ASSIGN_OR_RETURN(ReduceOp op, ParseReduceOp(ctx.Attr<std::string>("reduce_op")));
  Tensor* out = ctx.Output("Out");
  LOOM_ASSIGN_OR_RETURN(const DataType wire, WireDtype(ctx, in.dtype()));
  if (wire == in.dtype()) {
    LOOM_RETURN_IF_ERROR(InputsReady(ctx));
    return comm->ReduceScatter(in, out, op);
  }
  if (out->dtype() != in.dtype() || out->numel() * comm->size() != in.numel()) {
    return Internal("reduce_scatter of ", MetaToString(in.meta()), " into ",
                    MetaToString(out->meta()), " over ", comm->size(), " ranks");
  }
  Tensor narrow_in, narrow_out;
  LOOM_RETURN_IF_ERROR(
      narrow_in.Resize(TensorMeta{wire, in.shape()}, DeviceOf(ctx), ctx.stream()));
  LOOM_RETURN_IF_ERROR(
      narrow_out.Resize(TensorMeta{wire, out->shape()}, DeviceOf(ctx), ctx.stream()));
  LOOM_RETURN_IF_ERROR(
      Convert(ctx, in.dtype(), in.raw_data(), wire, narrow_in.raw_data(), in.numel()));
  LOOM_RETURN_IF_ERROR(InputsReady(ctx));
  LOOM_RETURN_IF_ERROR(comm->ReduceScatter(narrow_in, &narrow_out, op));
  return Convert(ctx, wire, narrow_out.raw_data(), out->dtype(), out->raw_data(), out->numel());
}

// Along an axis with dims before it, X's blocks are first regrouped
// rank-major in a scratch, which is then reduce-scattered.
Status ReduceScatterAlongAxis(const KernelContext& ctx, Communicator* comm) {
  const Tensor& in = ctx.Input("X");
  if (ctx.Attr<int32_t>("axis") == 0) return ReduceScatterKernel(ctx, comm, in);
  const Tensor& out = *ctx.Output("Out");
  LOOM_ASSIGN_OR_RETURN(const AxisBlocks b, BlocksOf(ctx, out, in, comm->size()));
  const TensorMeta stacked = Stacked(out, comm->size());
  if (b.outer == 1) return ReduceScatterKernel(ctx, comm, in.View(0, stacked.shape));
  Tensor scratch;
  LOOM_RETURN_IF_ERROR(scratch.Resize(stacked, DeviceOf(ctx), ctx.stream()));
  LOOM_RETURN_IF_ERROR(
      Restack(ctx, b, comm->size(), in.raw_data(), scratch.raw_data(), /*to_axis=*/false));
  return ReduceScatterKernel(ctx, comm, scratch);
}

// One rank's allgather along axis repeats each block of X; its
// reduce_scatter keeps each block's first part.
Status LocalAlongAxis(const KernelContext& ctx, bool gather) {
  const Tensor& in = ctx.Input("X");
  Tensor* out = ctx.Output("Out");
  const Tensor& part = gather ? in : *out;
  const Tensor& whole = gather ? *out : in;
  if (part.bytes() == 0) return Status::OK();
  const int64_t n = whole.bytes() / part.bytes();
  LOOM_ASSIGN_OR_RETURN(const AxisBlocks b, BlocksOf(ctx, part, whole, n));
  const auto* src = static_cast<const uint8_t*>(in.raw_data());
  auto* dst = static_cast<uint8_t*>(out->raw_data());
  for (int64_t o = 0; o < b.outer; ++o) {
    for (int64_t r = 0; r < (gather ? n : 1); ++r) {
      const int64_t at = (o * n + r) * b.bytes;  // in the whole
      LOOM_RETURN_IF_ERROR(DeviceOf(ctx)->Copy(gather ? dst + at : dst + o * b.bytes,
                                               gather ? src + o * b.bytes : src + at, b.bytes,
                                               ctx.stream()));
    }
  }
  return Status::OK();
}

// The one op that computes around its calls (OpSchema::ComputesAroundCall)
// has its own kernel, given the call to make.
Status ComputeAroundCall(const Instruction& ins, const KernelContext& ctx, Communicator* comm) {
  if (ins.op_type == "c_softmax_with_cross_entropy") {
    return VocabParallelCrossEntropyOn(ctx, [comm](const std::vector<Tensor*>& rows, bool max) {
      if (comm == nullptr) return Status::OK();  // one rank alone: its shard is all
      return comm->AllReduce(rows, max ? ReduceOp::kMax : ReduceOp::kSum);
    });
  }
  return Unimplemented("no kernel computes around the calls of ", ins.op_type);
}

}  // namespace

CommKernelFn MakeCommKernels(CommWorld* world) {
  return [world](const Instruction& ins, const KernelContext& ctx) -> Status {
    LOOM_ASSIGN_OR_RETURN(Communicator* comm, world->Get(static_cast<RingId>(ins.ring)));
    if (ins.computes_around_call) return ComputeAroundCall(ins, ctx, comm);
    switch (ins.call) {
      case CommCall::kAllReduce:
        return AllReduceKernel(ctx, comm);
      case CommCall::kBroadcast: {
        Tensor* out = ctx.Output("Out");
        LOOM_RETURN_IF_ERROR(CopyTensor(ctx, ctx.Input("X"), out));
        LOOM_RETURN_IF_ERROR(InputsReady(ctx));
        return comm->Broadcast(out, ctx.Attr<int32_t>("root"));
      }
      // These wait for their stream themselves, after their own copies.
      case CommCall::kAllGather:
        return AllGatherKernel(ctx, comm);
      case CommCall::kReduceScatter:
        return ReduceScatterAlongAxis(ctx, comm);
      // A recv too waits: its output may reuse memory the stream's earlier
      // work still reads (stream-ordered allocation).
      case CommCall::kSend:
        LOOM_RETURN_IF_ERROR(InputsReady(ctx));
        return comm->Send(ctx.Input("X"), ctx.Attr<int32_t>("peer"));
      case CommCall::kRecv:
        LOOM_RETURN_IF_ERROR(InputsReady(ctx));
        return comm->Recv(ctx.Output("Out"), ctx.Attr<int32_t>("peer"));
      case CommCall::kNone:
        break;
    }
    return Unimplemented("no communication kernel for ", ins.op_type);
  };
}

CommKernelFn MakeLocalCommKernels() {
  return [](const Instruction& ins, const KernelContext& ctx) -> Status {
    if (ins.computes_around_call) return ComputeAroundCall(ins, ctx, /*comm=*/nullptr);
    switch (ins.call) {
      case CommCall::kAllReduce:
        for (int i = 0; i < ctx.OutputCount("Out"); ++i) {
          LOOM_RETURN_IF_ERROR(CopyTensor(ctx, ctx.Input("X", i), ctx.Output("Out", i)));
        }
        return Status::OK();
      case CommCall::kBroadcast:
        return CopyTensor(ctx, ctx.Input("X"), ctx.Output("Out"));
      case CommCall::kAllGather:
      case CommCall::kReduceScatter:
        return LocalAlongAxis(ctx, ins.call == CommCall::kAllGather);
      case CommCall::kSend:
        return Status::OK();
      case CommCall::kRecv: {
        Tensor* out = ctx.Output("Out");
        return DeviceOf(ctx)->Memset(out->raw_data(), 0, out->bytes(), ctx.stream());
      }
      case CommCall::kNone:
        break;
    }
    return Unimplemented("no local kernel for communication op ", ins.op_type);
  };
}

}  // namespace loom
