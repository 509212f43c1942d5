// CUDA kernels for elementwise_{add,sub,mul}, scale and sum, and their
// gradients (host side). Broadcast gradients sum in the CPU kernels' order
// per element where the reduced extent is short (elementwise.cu).
#include <vector>

#include "executor/kernels/cuda/cuda_kernel_helpers.h"

namespace loom {
namespace {

Status Binary(const KernelContext& ctx, cuda::BinaryOp op, const char* name) {
  const Tensor& x = ctx.Input("X");
  const Tensor& y = ctx.Input("Y");
  Tensor* out = ctx.Output("Out");
  if (x.shape() == y.shape()) {
    cuda::LaunchBinary(op, x.data<float>(), y.data<float>(), out->data<float>(), x.numel(), nullptr,
                       1.0f, NativeStream(ctx));
    return LastLaunchStatus(name);
  }
  LOOM_ASSIGN_OR_RETURN(cuda::BroadcastIndex index,
                        BroadcastIndexFor(out->shape(), x.shape(), y.shape()));
  cuda::LaunchBinary(op, x.data<float>(), y.data<float>(), out->data<float>(), out->numel(), &index,
                     1.0f, NativeStream(ctx));
  return LastLaunchStatus(name);
}

Status AddKernel(const KernelContext& ctx) { return Binary(ctx, cuda::kAdd, "elementwise_add"); }
Status SubKernel(const KernelContext& ctx) { return Binary(ctx, cuda::kSub, "elementwise_sub"); }
Status MulKernel(const KernelContext& ctx) { return Binary(ctx, cuda::kMul, "elementwise_mul"); }

// d(target) = sign * sum over the broadcast dims of g * f (f optional,
// broadcast from `factor`).
Status ReduceGradTo(const KernelContext& ctx, const Tensor& g, const Tensor* f, Tensor* target,
                    float sign) {
  LOOM_ASSIGN_OR_RETURN(cuda::ReducePlan plan,
                        ReducePlanFor(g.shape(), target->shape(), f ? &f->shape() : nullptr));
  std::shared_ptr<void> scratch;
  const int64_t bytes = cuda::ReduceScratchBytes(plan, /*in_double=*/false);
  if (bytes > 0) {
    LOOM_ASSIGN_OR_RETURN(scratch, Scratch(ctx, bytes));
  }
  cuda::LaunchReduce(plan, g.data<float>(), f ? f->data<float>() : nullptr, target->data<float>(),
                     sign, /*in_double=*/false, scratch.get(), NativeStream(ctx));
  return LastLaunchStatus(ctx.type());
}

// add_grad and sub_grad: dX = sum-to-shape(dOut), dY = sign * the same.
Status AddSubGrad(const KernelContext& ctx, float y_sign) {
  const Tensor& dout = ctx.Input("Out@GRAD");
  if (ctx.HasOutput("X@GRAD")) {
    LOOM_RETURN_IF_ERROR(ReduceGradTo(ctx, dout, nullptr, ctx.Output("X@GRAD"), 1.0f));
  }
  if (ctx.HasOutput("Y@GRAD")) {
    LOOM_RETURN_IF_ERROR(ReduceGradTo(ctx, dout, nullptr, ctx.Output("Y@GRAD"), y_sign));
  }
  return Status::OK();
}

Status AddGradKernel(const KernelContext& ctx) { return AddSubGrad(ctx, 1.0f); }
Status SubGradKernel(const KernelContext& ctx) { return AddSubGrad(ctx, -1.0f); }

Status MulGradKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const Tensor& y = ctx.Input("Y");
  const Tensor& dout = ctx.Input("Out@GRAD");
  if (ctx.HasOutput("X@GRAD")) {
    LOOM_RETURN_IF_ERROR(ReduceGradTo(ctx, dout, &y, ctx.Output("X@GRAD"), 1.0f));
  }
  if (ctx.HasOutput("Y@GRAD")) {
    LOOM_RETURN_IF_ERROR(ReduceGradTo(ctx, dout, &x, ctx.Output("Y@GRAD"), 1.0f));
  }
  return Status::OK();
}

Status ScaleKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  cuda::LaunchScale(x.data<float>(), ctx.Output("Out")->data<float>(), x.numel(),
                    ctx.Attr<float>("scale"), ctx.Attr<float>("bias"), NativeStream(ctx));
  return LastLaunchStatus("scale");
}

Status SumKernel(const KernelContext& ctx) {
  Tensor* out = ctx.Output("Out");
  float* po = out->data<float>();
  const int64_t n = out->numel();
  const int count = ctx.InputCount("X");
  if (count <= cuda::kMaxSumInputs) {
    // One pass reads every input before writing: Out may alias any of them.
    cuda::SumInputs in;
    in.count = count;
    for (int k = 0; k < count; ++k) in.in[k] = ctx.Input("X", k).data<float>();
    cuda::LaunchSum(in, po, n, NativeStream(ctx));
    return LastLaunchStatus("sum");
  }
  // More inputs: accumulate left to right in scratch (so an aliased input
  // is never overwritten early), then copy. Same order as the CPU's.
  LOOM_ASSIGN_OR_RETURN(std::shared_ptr<void> acc_mem, Scratch(ctx, n * sizeof(float)));
  float* acc = static_cast<float*>(acc_mem.get());
  cuda::SumInputs in;
  in.count = 0;
  in.in[in.count++] = ctx.Input("X", 0).data<float>();
  for (int k = 1; k < count; ++k) {
    in.in[in.count++] = ctx.Input("X", k).data<float>();
    if (in.count == cuda::kMaxSumInputs || k == count - 1) {
      cuda::LaunchSum(in, acc, n, NativeStream(ctx));
      LOOM_RETURN_IF_ERROR(LastLaunchStatus("sum"));
      in.count = 0;
      in.in[in.count++] = acc;
    }
  }
  return CopyOnDevice(ctx, po, acc, n * sizeof(float));
}

}  // namespace

void RegisterElementwiseCudaKernels() {
  auto& r = KernelRegistry::Cuda();
  r.Register("elementwise_add", AddKernel);
  r.Register("elementwise_sub", SubKernel);
  r.Register("elementwise_mul", MulKernel);
  r.Register("elementwise_add_grad", AddGradKernel);
  r.Register("elementwise_sub_grad", SubGradKernel);
  r.Register("elementwise_mul_grad", MulGradKernel);
  r.Register("scale", ScaleKernel);
  r.Register("sum", SumKernel);
}

}  // namespace loom
