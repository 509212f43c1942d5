#include "executor/comm_kernels.h"

#include <cmath>
#include <cstring>
#include <limits>

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

// Megatron's vocabulary-parallel cross entropy: this rank holds columns
// [rank * V, (rank + 1) * V) of every row's logits. Three all-reduces over
// per-row values give the global row maximum, the global sum of
// exponentials and the target logit; the softmax shard and the loss follow
// locally.
Status ParallelCrossEntropy(const KernelContext& ctx, Communicator* comm) {
  const Tensor& logits = ctx.Input("Logits");
  const Tensor& label = ctx.Input("Label");
  Tensor* softmax = ctx.Output("Softmax");
  Tensor* loss = ctx.Output("Loss");
  const int64_t v = logits.shape().back();
  const int64_t rows = logits.numel() / v;
  const int64_t start = ctx.Attr<int32_t>("rank") * v;
  const int64_t total = ctx.Attr<int32_t>("nranks") * v;
  const int64_t ignore = ctx.Attr<int32_t>("ignore_index");
  const float* x = logits.data<float>();
  const int64_t* y = label.data<int64_t>();
  for (int64_t r = 0; r < rows; ++r) {
    if (y[r] != ignore && (y[r] < 0 || y[r] >= total)) {
      return InvalidArgument("Label[", r, "] = ", y[r], " is out of range [0, ",
                             total, ")");
    }
  }
  Tensor row_max(TensorMeta{proto::FP32, {rows}});
  Tensor row_sum(TensorMeta{proto::FP32, {rows}});
  Tensor target(TensorMeta{proto::FP32, {rows}});
  float* m = row_max.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    float best = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < v; ++c) best = std::max(best, x[r * v + c]);
    m[r] = best;
  }
  LOOM_RETURN_IF_ERROR(comm->AllReduce({&row_max}, ReduceOp::kMax));
  float* e = softmax->data<float>();
  float* s = row_sum.data<float>();
  float* t = target.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0;
    for (int64_t c = 0; c < v; ++c) {
      e[r * v + c] = std::exp(x[r * v + c] - m[r]);
      acc += e[r * v + c];
    }
    s[r] = static_cast<float>(acc);
    const int64_t local = y[r] - start;
    t[r] = (y[r] != ignore && local >= 0 && local < v) ? x[r * v + local] - m[r] : 0.0f;
  }
  LOOM_RETURN_IF_ERROR(comm->AllReduce({&row_sum, &target}, ReduceOp::kSum));
  float* out = loss->data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float inv = 1.0f / s[r];
    for (int64_t c = 0; c < v; ++c) e[r * v + c] *= inv;
    out[r] = y[r] == ignore ? 0.0f : std::log(s[r]) - t[r];
  }
  return Status::OK();
}

}  // namespace

CommKernelFn MakeCommKernels(CommWorld* world) {
  return [world](const Instruction& ins, const KernelContext& ctx) -> Status {
    LOOM_ASSIGN_OR_RETURN(Communicator* comm, world->Get(static_cast<RingId>(ins.ring)));
    const std::string& type = ins.op->type();
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
    if (type == "c_softmax_with_cross_entropy") return ParallelCrossEntropy(ctx, comm);
    return Unimplemented("no communication kernel for ", type);
  };
}

}  // namespace loom
