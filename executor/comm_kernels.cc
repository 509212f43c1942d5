#include "executor/comm_kernels.h"

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
      return comm->ReduceScatter(ctx.Input("X"), ctx.Output("Out"), ReduceOp::kSum);
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

}  // namespace loom
