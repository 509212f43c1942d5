#include "executor/comm_kernels.h"

#include <algorithm>
#include <cstring>

#include "executor/kernels/cpu/vocab_parallel_cross_entropy.h"

namespace loom {
namespace {

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
    const Tensor& in = ctx.Input("X", i);
    if (&in != out) out->CopyFrom(in);
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
    if (ctx.HasInput("Part")) {
      const Tensor& mine = ctx.Input("Part");
      if (mine.bytes() != part) {
        return InvalidArgument("Part holds ", mine.bytes(), " bytes, not a part's ", part);
      }
      std::memcpy(bytes + comm->rank() * part, mine.raw_data(), part);
    }
    std::memset(bytes, 0, comm->rank() * part);
    std::memset(bytes + (comm->rank() + 1) * part, 0, (parts - comm->rank() - 1) * part);
  }
  return comm->AllReduce(bucket, op);
}

}  // namespace

CommKernelFn MakeCommKernels(CommWorld* world) {
  return [world](const Instruction& ins, const KernelContext& ctx) -> Status {
    LOOM_ASSIGN_OR_RETURN(Communicator* comm, world->Get(static_cast<RingId>(ins.ring)));
    const std::string& type = ins.op_type;
    if (type == "allreduce") return AllReduceKernel(ctx, comm);
    if (type == "allgather") return comm->AllGather(ctx.Input("X"), ctx.Output("Out"));
    if (type == "reduce_scatter") {
      LOOM_ASSIGN_OR_RETURN(ReduceOp op, ParseReduceOp(ctx.Attr<std::string>("reduce_op")));
      return comm->ReduceScatter(ctx.Input("X"), ctx.Output("Out"), op);
    }
    if (type == "broadcast") {
      Tensor* out = ctx.Output("Out");
      if (&ctx.Input("X") != out) out->CopyFrom(ctx.Input("X"));
      return comm->Broadcast(out, ctx.Attr<int32_t>("root"));
    }
    if (type == "send") return comm->Send(ctx.Input("X"), ctx.Attr<int32_t>("peer"));
    if (type == "recv") return comm->Recv(ctx.Output("Out"), ctx.Attr<int32_t>("peer"));
    if (type == "c_softmax_with_cross_entropy") {
      return VocabParallelCrossEntropy(
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
    auto copy = [&](const Tensor& in, Tensor* out) {
      if (&in != out) out->CopyFrom(in);
    };
    if (type == "allreduce") {
      for (int i = 0; i < ctx.OutputCount("Out"); ++i) {
        copy(ctx.Input("X", i), ctx.Output("Out", i));
      }
      return Status::OK();
    }
    if (type == "broadcast") {
      copy(ctx.Input("X"), ctx.Output("Out"));
      return Status::OK();
    }
    if (type == "allgather" || type == "reduce_scatter") {
      const Tensor& in = ctx.Input("X");
      Tensor* out = ctx.Output("Out");
      const bool gather = type == "allgather";
      const size_t part = gather ? in.bytes() : out->bytes();
      const auto* src = static_cast<const char*>(in.raw_data());
      auto* dst = static_cast<char*>(out->raw_data());
      for (size_t at = 0; at < out->bytes(); at += part) {
        std::memcpy(dst + at, src + (gather ? 0 : at), std::min(part, out->bytes() - at));
        if (!gather) break;
      }
      return Status::OK();
    }
    if (type == "send") return Status::OK();
    if (type == "recv") {
      Tensor* out = ctx.Output("Out");
      std::memset(out->raw_data(), 0, out->bytes());
      return Status::OK();
    }
    if (type == "c_softmax_with_cross_entropy") {
      return VocabParallelCrossEntropy(ctx, [](const std::vector<Tensor*>&, bool) {
        return Status::OK();
      });
    }
    return Unimplemented("no local kernel for communication op ", type);
  };
}

}  // namespace loom
