// CUDA kernels for gelu and relu and their gradients (host side), on
// fp32, bf16 and fp16 tensors (activation.cu).
#include "executor/kernels/cuda/cuda_kernel_helpers.h"

namespace loom {
namespace {

Status GeluKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  Tensor* out = ctx.Output("Out");
  LOOM_ASSIGN_OR_RETURN(cuda::FloatType t, FloatTypeOf(ctx, {&x, out}));
  cuda::LaunchGelu(t, x.raw_data(), out->raw_data(), x.numel(),
                   ctx.Attr<bool>("approximate"), NativeStream(ctx));
  return LastLaunchStatus("gelu");
}

Status GeluGradKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const Tensor& dout = ctx.Input("Out@GRAD");
  Tensor* dx = ctx.Output("X@GRAD");
  LOOM_ASSIGN_OR_RETURN(cuda::FloatType t, FloatTypeOf(ctx, {&x, &dout, dx}));
  cuda::LaunchGeluGrad(t, x.raw_data(), dout.raw_data(), dx->raw_data(), x.numel(),
                       ctx.Attr<bool>("approximate"), NativeStream(ctx));
  return LastLaunchStatus("gelu_grad");
}

Status ReluKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  Tensor* out = ctx.Output("Out");
  LOOM_ASSIGN_OR_RETURN(cuda::FloatType t, FloatTypeOf(ctx, {&x, out}));
  cuda::LaunchRelu(t, x.raw_data(), out->raw_data(), x.numel(), NativeStream(ctx));
  return LastLaunchStatus("relu");
}

Status ReluGradKernel(const KernelContext& ctx) {
  const Tensor& out = ctx.Input("Out");
  const Tensor& dout = ctx.Input("Out@GRAD");
  Tensor* dx = ctx.Output("X@GRAD");
  LOOM_ASSIGN_OR_RETURN(cuda::FloatType t, FloatTypeOf(ctx, {&out, &dout, dx}));
  cuda::LaunchReluGrad(t, out.raw_data(), dout.raw_data(), dx->raw_data(), out.numel(),
                       NativeStream(ctx));
  return LastLaunchStatus("relu_grad");
}

}  // namespace

void RegisterActivationCudaKernels() {
  auto& r = KernelRegistry::Cuda();
  r.Register("gelu", GeluKernel, LowPrecision::kNative);
  r.Register("gelu_grad", GeluGradKernel, LowPrecision::kNative);
  r.Register("relu", ReluKernel, LowPrecision::kNative);
  r.Register("relu_grad", ReluGradKernel, LowPrecision::kNative);
}

}  // namespace loom
