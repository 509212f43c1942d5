// CUDA kernels for elementwise_{add,sub,mul}, scale and sum, and their
// gradients (host side), on fp32, bf16 and fp16 tensors: each op's tensors
// share one dtype. Broadcast gradients sum in the CPU kernels' order per
// element where the reduced extent is short (elementwise.cu).
#include <vector>

#include "executor/kernels/cuda/cuda_kernel_helpers.h"

namespace loom {
namespace {

Status Binary(const KernelContext& ctx, cuda::BinaryOp op, const char* name) {
  const Tensor& x = ctx.Input("X");
  const Tensor& y = ctx.Input("Y");
  Tensor* out = ctx.Output("Out");
  LOOM_ASSIGN_OR_RETURN(cuda::FloatType t, FloatTypeOf(ctx, {&x, &y, out}));
  if (x.shape() == y.shape()) {
    cuda::LaunchBinary(t, op, x.raw_data(), y.raw_data(), out->raw_data(), x.numel(), nullptr,
                       1.0f, NativeStream(ctx));
    return LastLaunchStatus(name);
  }
  LOOM_ASSIGN_OR_RETURN(cuda::BroadcastIndex index,
                        BroadcastIndexFor(out->shape(), x.shape(), y.shape()));
  cuda::LaunchBinary(t, op, x.raw_data(), y.raw_data(), out->raw_data(), out->numel(), &index,
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
  LOOM_ASSIGN_OR_RETURN(cuda::FloatType t, FloatTypeOf(ctx, {&g, f, target}));
  LOOM_ASSIGN_OR_RETURN(cuda::ReducePlan plan,
                        ReducePlanFor(g.shape(), target->shape(), f ? &f->shape() : nullptr));
  std::shared_ptr<void> scratch;
  const int64_t bytes = cuda::ReduceScratchBytes(plan, /*in_double=*/false);
  if (bytes > 0) {
    LOOM_ASSIGN_OR_RETURN(scratch, Scratch(ctx, bytes));
  }
  cuda::LaunchReduce(t, plan, g.raw_data(), f ? f->raw_data() : nullptr, target->raw_data(), sign,
                     /*in_double=*/false, scratch.get(), NativeStream(ctx));
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
  Tensor* out = ctx.Output("Out");
  LOOM_ASSIGN_OR_RETURN(cuda::FloatType t, FloatTypeOf(ctx, {&x, out}));
  cuda::LaunchScale(t, x.raw_data(), out->raw_data(), x.numel(), ctx.Attr<float>("scale"),
                    ctx.Attr<float>("bias"), NativeStream(ctx));
  return LastLaunchStatus("scale");
}

Status SumKernel(const KernelContext& ctx) {
  Tensor* out = ctx.Output("Out");
  const int64_t n = out->numel();
  const int count = ctx.InputCount("X");
  std::vector<const Tensor*> xs;
  for (int k = 0; k < count; ++k) xs.push_back(&ctx.Input("X", k));
  // Out's storage type, which every input must share.
  LOOM_ASSIGN_OR_RETURN(cuda::FloatType t, FloatTypeOf(ctx, {out}));
  for (const Tensor* x : xs) {
    LOOM_RETURN_IF_ERROR(FloatTypeOf(ctx, {x, out}).status());
  }
  if (count <= cuda::kMaxSumInputs) {
    // One pass reads every input before writing: Out may alias any of them.
    cuda::SumInputs in;
    in.count = count;
    for (int k = 0; k < count; ++k) in.in[k] = xs[k]->raw_data();
    cuda::LaunchSum(t, in, t, out->raw_data(), n, NativeStream(ctx));
    return LastLaunchStatus("sum");
  }
  // More inputs: accumulate left to right in fp32 scratch (so an aliased
  // input is never overwritten early, and a bf16/fp16 sum is rounded only
  // at the end), then copy or round into Out. Same order as the CPU's.
  LOOM_ASSIGN_OR_RETURN(std::shared_ptr<void> acc_mem, Scratch(ctx, n * sizeof(float)));
  float* acc = static_cast<float*>(acc_mem.get());
  cuda::SumInputs in;
  in.in[in.count++] = xs[0]->raw_data();
  for (int k = 1; k < count; ++k) {
    in.in[in.count++] = xs[k]->raw_data();
    const int places = in.count + (in.carry != nullptr ? 1 : 0);
    if (places == cuda::kMaxSumInputs || k == count - 1) {
      cuda::LaunchSum(t, in, cuda::kFp32, acc, n, NativeStream(ctx));
      LOOM_RETURN_IF_ERROR(LastLaunchStatus("sum"));
      in.carry = acc;
      in.count = 0;
    }
  }
  if (t == cuda::kFp32) return CopyOnDevice(ctx, out->raw_data(), acc, n * sizeof(float));
  cuda::LaunchCast(cuda::kFp32, acc, t, out->raw_data(), n, NativeStream(ctx));
  return LastLaunchStatus("sum");
}

}  // namespace

void RegisterElementwiseCudaKernels() {
  auto& r = KernelRegistry::Cuda();
  r.Register("elementwise_add", AddKernel, LowPrecision::kNative);
  r.Register("elementwise_sub", SubKernel, LowPrecision::kNative);
  r.Register("elementwise_mul", MulKernel, LowPrecision::kNative);
  r.Register("elementwise_add_grad", AddGradKernel, LowPrecision::kNative);
  r.Register("elementwise_sub_grad", SubGradKernel, LowPrecision::kNative);
  r.Register("elementwise_mul_grad", MulGradKernel, LowPrecision::kNative);
  r.Register("scale", ScaleKernel, LowPrecision::kNative);
  r.Register("sum", SumKernel, LowPrecision::kNative);
}

}  // namespace loom
