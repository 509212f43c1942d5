// CUDA kernels for gelu and relu and their gradients (host side).
#include "executor/kernels/cuda/cuda_kernel_helpers.h"

namespace loom {
namespace {

Status GeluKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  cuda::LaunchGelu(x.data<float>(), ctx.Output("Out")->data<float>(), x.numel(),
                   ctx.Attr<bool>("approximate"), NativeStream(ctx));
  return LastLaunchStatus("gelu");
}

Status GeluGradKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  cuda::LaunchGeluGrad(x.data<float>(), ctx.Input("Out@GRAD").data<float>(),
                       ctx.Output("X@GRAD")->data<float>(), x.numel(),
                       ctx.Attr<bool>("approximate"), NativeStream(ctx));
  return LastLaunchStatus("gelu_grad");
}

Status ReluKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  cuda::LaunchRelu(x.data<float>(), ctx.Output("Out")->data<float>(), x.numel(), NativeStream(ctx));
  return LastLaunchStatus("relu");
}

Status ReluGradKernel(const KernelContext& ctx) {
  const Tensor& out = ctx.Input("Out");
  cuda::LaunchReluGrad(out.data<float>(), ctx.Input("Out@GRAD").data<float>(),
                       ctx.Output("X@GRAD")->data<float>(), out.numel(), NativeStream(ctx));
  return LastLaunchStatus("relu_grad");
}

}  // namespace

void RegisterActivationCudaKernels() {
  auto& r = KernelRegistry::Cuda();
  r.Register("gelu", GeluKernel);
  r.Register("gelu_grad", GeluGradKernel);
  r.Register("relu", ReluKernel);
  r.Register("relu_grad", ReluGradKernel);
}

}  // namespace loom
