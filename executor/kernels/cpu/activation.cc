// CPU kernels for gelu and relu and their gradients.
#include <algorithm>
#include <cmath>

#include "executor/kernels/cpu/branch_free_math.h"
#include "executor/kernels/cpu/cpu_helpers.h"

namespace loom {
namespace {

constexpr float kSqrtHalf = 0.70710678118654752f;     // 1 / sqrt(2)
constexpr float kInvSqrt2Pi = 0.39894228040143268f;   // 1 / sqrt(2 pi)
constexpr float kSqrt2OverPi = 0.79788456080286536f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;

Status GeluKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const float* px = x.data<float>();
  float* po = ctx.Output("Out")->data<float>();
  const int64_t n = x.numel();
  if (ctx.Attr<bool>("approximate")) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = px[i];
      const float u = kSqrt2OverPi * (v + kGeluCubic * v * v * v);
      po[i] = 0.5f * v * (1.0f + branch_free::Tanh(u));
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float v = px[i];
      po[i] = 0.5f * v * (1.0f + branch_free::Erf(v * kSqrtHalf));
    }
  }
  return Status::OK();
}

Status GeluGradKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const float* px = x.data<float>();
  const float* pg = ctx.Input("Out@GRAD").data<float>();
  float* dx = ctx.Output("X@GRAD")->data<float>();
  const int64_t n = x.numel();
  if (ctx.Attr<bool>("approximate")) {
    // d/dx 0.5 x (1 + tanh u) = 0.5 (1 + t) + 0.5 x (1 - t^2) u'.
    for (int64_t i = 0; i < n; ++i) {
      const float v = px[i];
      const float t = branch_free::Tanh(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
      const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
      dx[i] = pg[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
    }
  } else {
    // d/dx x Phi(x) = Phi(x) + x phi(x).
    for (int64_t i = 0; i < n; ++i) {
      const float v = px[i];
      const float cdf = 0.5f * (1.0f + branch_free::Erf(v * kSqrtHalf));
      // e^-87 is 0 to float's precision here; the clamp keeps the exp in range.
      const float pdf = kInvSqrt2Pi * branch_free::ExpNonPositive(-std::min(0.5f * v * v, 87.0f));
      dx[i] = pg[i] * (cdf + v * pdf);
    }
  }
  return Status::OK();
}

Status ReluKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const float* px = x.data<float>();
  float* po = ctx.Output("Out")->data<float>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) {
    po[i] = px[i] > 0.0f ? px[i] : 0.0f;
  }
  return Status::OK();
}

Status ReluGradKernel(const KernelContext& ctx) {
  const Tensor& out = ctx.Input("Out");
  const float* po = out.data<float>();
  const float* pg = ctx.Input("Out@GRAD").data<float>();
  float* dx = ctx.Output("X@GRAD")->data<float>();
  for (int64_t i = 0, n = out.numel(); i < n; ++i) {
    dx[i] = po[i] > 0.0f ? pg[i] : 0.0f;
  }
  return Status::OK();
}

}  // namespace

void RegisterActivationCpuKernels() {
  auto& r = KernelRegistry::Cpu();
  r.Register("gelu", GeluKernel);
  r.Register("gelu_grad", GeluGradKernel);
  r.Register("relu", ReluKernel);
  r.Register("relu_grad", ReluGradKernel);
}

}  // namespace loom
