// CPU kernels for sgd and adamw. Every output may alias its input (the
// updates run in place), so each element is read before it is written and
// the scalars are read before any output is touched.
#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "executor/kernels/cpu/cpu_helpers.h"

namespace loom {
namespace {

Status RequireFp32(const KernelContext& ctx, const Tensor& param) {
  if (param.dtype() != proto::FP32) {
    return Unimplemented(ctx.type(), " of ", DataTypeName(param.dtype()));
  }
  return Status::OK();
}

// What the gradient is multiplied by: GradScale (clipping and a loss scale
// undone, framework/grad_clip.h), 1 without it. Multiplying by 1 is exact,
// so an update without GradScale has the bits it always had.
float GradFactor(const KernelContext& ctx) {
  return ctx.HasInput("GradScale") ? ctx.Input("GradScale").data<float>()[0] : 1.0f;
}

// A skipped update (GradScale not finite: the step's gradients overflowed):
// every output keeps its input's value.
void KeepInputs(const KernelContext& ctx, std::initializer_list<const char*> slots) {
  for (const char* slot : slots) {
    const Tensor& in = ctx.Input(slot);
    Tensor* out = ctx.Output(StrCat(slot, "Out"));
    if (out->data<float>() != in.data<float>()) {
      std::copy(in.data<float>(), in.data<float>() + in.numel(), out->data<float>());
    }
  }
}

Status SgdKernel(const KernelContext& ctx) {
  const Tensor& param = ctx.Input("Param");
  LOOM_RETURN_IF_ERROR(RequireFp32(ctx, param));
  const float factor = GradFactor(ctx);
  if (!std::isfinite(factor)) {
    KeepInputs(ctx, {"Param"});
    return Status::OK();
  }
  const float lr = ctx.Input("LearningRate").data<float>()[0];
  const float* p = param.data<float>();
  const float* g = ctx.Input("Grad").data<float>();
  float* out = ctx.Output("ParamOut")->data<float>();
  for (int64_t i = 0, n = param.numel(); i < n; ++i) out[i] = p[i] - lr * (g[i] * factor);
  return Status::OK();
}

Status AdamWKernel(const KernelContext& ctx) {
  const Tensor& param = ctx.Input("Param");
  LOOM_RETURN_IF_ERROR(RequireFp32(ctx, param));
  const float beta1 = ctx.Attr<float>("beta1");
  const float beta2 = ctx.Attr<float>("beta2");
  const float eps = ctx.Attr<float>("epsilon");
  const float wd = ctx.Attr<float>("weight_decay");
  const float lr = ctx.Input("LearningRate").data<float>()[0];
  const float beta1_pow = ctx.Input("Beta1Pow").data<float>()[0];
  const float beta2_pow = ctx.Input("Beta2Pow").data<float>()[0];
  // Bias corrections, folded into per-step scalars.
  const float step = static_cast<float>(lr / (1.0 - double{beta1_pow}));
  const float inv_c2 = static_cast<float>(1.0 / (1.0 - double{beta2_pow}));
  const float decay = 1.0f - lr * wd;
  const float factor = GradFactor(ctx);
  if (!std::isfinite(factor)) {
    KeepInputs(ctx, {"Param", "Moment1", "Moment2", "Beta1Pow", "Beta2Pow"});
    return Status::OK();
  }

  const float* p = param.data<float>();
  const float* g = ctx.Input("Grad").data<float>();
  const float* m = ctx.Input("Moment1").data<float>();
  const float* v = ctx.Input("Moment2").data<float>();
  float* p_out = ctx.Output("ParamOut")->data<float>();
  float* m_out = ctx.Output("Moment1Out")->data<float>();
  float* v_out = ctx.Output("Moment2Out")->data<float>();
  for (int64_t i = 0, n = param.numel(); i < n; ++i) {
    const float gi = g[i] * factor;
    const float mi = beta1 * m[i] + (1.0f - beta1) * gi;
    const float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    const float pi = p[i] * decay;
    m_out[i] = mi;
    v_out[i] = vi;
    p_out[i] = pi - step * mi / (std::sqrt(vi * inv_c2) + eps);
  }
  ctx.Output("Beta1PowOut")->data<float>()[0] = beta1_pow * beta1;
  ctx.Output("Beta2PowOut")->data<float>()[0] = beta2_pow * beta2;
  return Status::OK();
}

}  // namespace

void RegisterOptimizerCpuKernels() {
  auto& r = KernelRegistry::Cpu();
  r.Register("sgd", SgdKernel);
  r.Register("adamw", AdamWKernel);
}

}  // namespace loom
