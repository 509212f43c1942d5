// CUDA kernels for sgd and adamw (host side). The scalar inputs
// (LearningRate, Beta1Pow, Beta2Pow) stay on the device: the kernels read
// them there, so an update never waits for the host. fp32 only (registered
// kWidened, so the executor names the op if it meets a bf16/fp16 var): AMP
// keeps the master weights, their gradients and the moments in fp32.
#include "executor/kernels/cuda/cuda_kernel_helpers.h"

namespace loom {
namespace {

Status RequireFp32(const KernelContext& ctx, const Tensor& param) {
  if (param.dtype() != proto::FP32) {
    return Unimplemented(ctx.type(), " of ", DataTypeName(param.dtype()));
  }
  return Status::OK();
}

// GradScale on the device, read there (framework/grad_clip.h).
const float* GradScaleOrNull(const KernelContext& ctx) {
  return ctx.HasInput("GradScale") ? ctx.Input("GradScale").data<float>() : nullptr;
}

Status SgdKernel(const KernelContext& ctx) {
  const Tensor& param = ctx.Input("Param");
  LOOM_RETURN_IF_ERROR(RequireFp32(ctx, param));
  cuda::LaunchSgd(param.data<float>(), ctx.Input("Grad").data<float>(),
                  ctx.Input("LearningRate").data<float>(), GradScaleOrNull(ctx),
                  ctx.Output("ParamOut")->data<float>(), param.numel(), NativeStream(ctx));
  return LastLaunchStatus("sgd");
}

Status AdamWKernel(const KernelContext& ctx) {
  const Tensor& param = ctx.Input("Param");
  LOOM_RETURN_IF_ERROR(RequireFp32(ctx, param));
  cuda::AdamWArgs a;
  a.beta1 = ctx.Attr<float>("beta1");
  a.beta2 = ctx.Attr<float>("beta2");
  a.epsilon = ctx.Attr<float>("epsilon");
  a.weight_decay = ctx.Attr<float>("weight_decay");
  a.lr = ctx.Input("LearningRate").data<float>();
  a.grad_scale = GradScaleOrNull(ctx);
  a.beta1_pow = ctx.Input("Beta1Pow").data<float>();
  a.beta2_pow = ctx.Input("Beta2Pow").data<float>();
  a.beta1_pow_out = ctx.Output("Beta1PowOut")->data<float>();
  a.beta2_pow_out = ctx.Output("Beta2PowOut")->data<float>();
  cuda::LaunchAdamW(a, param.data<float>(), ctx.Input("Grad").data<float>(),
                    ctx.Input("Moment1").data<float>(), ctx.Input("Moment2").data<float>(),
                    ctx.Output("ParamOut")->data<float>(), ctx.Output("Moment1Out")->data<float>(),
                    ctx.Output("Moment2Out")->data<float>(), param.numel(), NativeStream(ctx));
  return LastLaunchStatus("adamw");
}

}  // namespace

void RegisterOptimizerCudaKernels() {
  auto& r = KernelRegistry::Cuda();
  r.Register("sgd", SgdKernel);
  r.Register("adamw", AdamWKernel);
}

}  // namespace loom
