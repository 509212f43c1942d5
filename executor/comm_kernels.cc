#include "executor/comm_kernels.h"

#include <algorithm>
#include <cstring>

#include "executor/cpu/cpu_device.h"
#include "executor/kernels/cpu/vocab_parallel_cross_entropy.h"
#ifdef LOOM_WITH_CUDA
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

Status AllReduceKernel(const KernelContext& ctx, Communicator* comm) {
  LOOM_ASSIGN_OR_RETURN(ReduceOp op, ParseReduceOp(ctx.Attr<std::string>("reduce_op")));
  std::vector<Tensor*> bucket;
  for (int i = 0; i < ctx.OutputCount("Out"); ++i) {
    Tensor* out = ctx.Output("Out", i);
    LOOM_RETURN_IF_ERROR(CopyTensor(ctx, ctx.Input("X", i), out));
    bucket.push_back(out);
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

}  // namespace

CommKernelFn MakeCommKernels(CommWorld* world) {
  return [world](const Instruction& ins, const KernelContext& ctx) -> Status {
    LOOM_ASSIGN_OR_RETURN(Communicator* comm, world->Get(static_cast<RingId>(ins.ring)));
    const std::string& type = ins.op_type;
    if (type == "allreduce") return AllReduceKernel(ctx, comm);
    if (type == "broadcast") {
      Tensor* out = ctx.Output("Out");
      LOOM_RETURN_IF_ERROR(CopyTensor(ctx, ctx.Input("X"), out));
      LOOM_RETURN_IF_ERROR(InputsReady(ctx));
      return comm->Broadcast(out, ctx.Attr<int32_t>("root"));
    }
    // A recv too: its output may reuse memory the stream's earlier work
    // still reads (stream-ordered allocation).
    LOOM_RETURN_IF_ERROR(InputsReady(ctx));
    if (type == "allgather") return comm->AllGather(ctx.Input("X"), ctx.Output("Out"));
    if (type == "reduce_scatter") {
      LOOM_ASSIGN_OR_RETURN(ReduceOp op, ParseReduceOp(ctx.Attr<std::string>("reduce_op")));
      return comm->ReduceScatter(ctx.Input("X"), ctx.Output("Out"), op);
    }
    if (type == "send") return comm->Send(ctx.Input("X"), ctx.Attr<int32_t>("peer"));
    if (type == "recv") return comm->Recv(ctx.Output("Out"), ctx.Attr<int32_t>("peer"));
    if (type == "c_softmax_with_cross_entropy") {
      return VocabParallelCrossEntropyOn(
          ctx, [comm](const std::vector<Tensor*>& rows, bool max) {
            return comm->AllReduce(rows, max ? ReduceOp::kMax : ReduceOp::kSum);
          });
    }
    return Unimplemented("no communication kernel for ", type);
  };
}

CommKernelFn MakeLocalCommKernels() {
  return [](const Instruction& ins, const KernelContext& ctx) -> Status {
    const std::string& type = ins.op_type;
    Device* device = DeviceOf(ctx);
    if (type == "allreduce") {
      for (int i = 0; i < ctx.OutputCount("Out"); ++i) {
        LOOM_RETURN_IF_ERROR(CopyTensor(ctx, ctx.Input("X", i), ctx.Output("Out", i)));
      }
      return Status::OK();
    }
    if (type == "broadcast") return CopyTensor(ctx, ctx.Input("X"), ctx.Output("Out"));
    if (type == "allgather" || type == "reduce_scatter") {
      const Tensor& in = ctx.Input("X");
      Tensor* out = ctx.Output("Out");
      const bool gather = type == "allgather";
      const int64_t part = gather ? in.bytes() : out->bytes();
      const auto* src = static_cast<const char*>(in.raw_data());
      auto* dst = static_cast<char*>(out->raw_data());
      for (int64_t at = 0; at < out->bytes(); at += part) {
        LOOM_RETURN_IF_ERROR(device->Copy(dst + at, src + (gather ? 0 : at),
                                          std::min(part, out->bytes() - at), ctx.stream()));
        if (!gather) break;
      }
      return Status::OK();
    }
    if (type == "send") return Status::OK();
    if (type == "recv") {
      Tensor* out = ctx.Output("Out");
      return device->Memset(out->raw_data(), 0, out->bytes(), ctx.stream());
    }
    if (type == "c_softmax_with_cross_entropy") {
      return VocabParallelCrossEntropyOn(ctx, [](const std::vector<Tensor*>&, bool) {
        return Status::OK();
      });
    }
    return Unimplemented("no local kernel for communication op ", type);
  };
}

}  // namespace loom
