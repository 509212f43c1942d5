// CPU kernels for layer_norm and layer_norm_grad. X is viewed as [rows, h]
// with h the product of the normalized dims.
#include <cmath>
#include <vector>

#include "executor/kernels/cpu/cpu_helpers.h"
#include "framework/ops/op_helpers.h"

namespace loom {
namespace {

struct RowsByH {
  int64_t rows;
  int64_t h;
};

StatusOr<RowsByH> SplitRows(const KernelContext& ctx, const Shape& x) {
  LOOM_ASSIGN_OR_RETURN(int axis,
                        NormalizeAxis(ctx.Attr<int32_t>("begin_norm_axis"),
                                      static_cast<int>(x.size())));
  return RowsByH{NumElements(Shape(x.begin(), x.begin() + axis)),
                 NumElements(Shape(x.begin() + axis, x.end()))};
}

const float* OptionalData(const KernelContext& ctx, const std::string& slot) {
  return ctx.HasInput(slot) ? ctx.Input(slot).data<float>() : nullptr;
}

Status LayerNormKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  LOOM_ASSIGN_OR_RETURN(RowsByH d, SplitRows(ctx, x.shape()));
  const double eps = ctx.Attr<float>("epsilon");
  const float* px = x.data<float>();
  const float* scale = OptionalData(ctx, "Scale");
  const float* bias = OptionalData(ctx, "Bias");
  float* py = ctx.Output("Y")->data<float>();
  float* pmean =
      ctx.HasOutput("Mean") ? ctx.Output("Mean")->data<float>() : nullptr;
  float* pvar = ctx.HasOutput("Variance")
                    ? ctx.Output("Variance")->data<float>()
                    : nullptr;
  for (int64_t r = 0; r < d.rows; ++r) {
    const float* xr = px + r * d.h;
    float* yr = py + r * d.h;
    // Two passes in double: the one-pass E[x^2] - E[x]^2 cancels badly.
    double sum = 0.0;
    for (int64_t j = 0; j < d.h; ++j) sum += xr[j];
    const double mean = sum / d.h;
    double sq = 0.0;
    for (int64_t j = 0; j < d.h; ++j) {
      const double c = xr[j] - mean;
      sq += c * c;
    }
    const double var = sq / d.h;
    const double rstd = 1.0 / std::sqrt(var + eps);
    if (pmean) pmean[r] = static_cast<float>(mean);
    if (pvar) pvar[r] = static_cast<float>(var);
    for (int64_t j = 0; j < d.h; ++j) {
      float v = static_cast<float>((xr[j] - mean) * rstd);
      if (scale) v *= scale[j];
      if (bias) v += bias[j];
      yr[j] = v;
    }
  }
  return Status::OK();
}

// With xhat = (x - mean) * rstd and g = dY * Scale, per row:
//   dX = rstd * (g - mean(g) - xhat * mean(g * xhat)),
//   dScale += dY * xhat, dBias += dY.
Status LayerNormGradKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  LOOM_ASSIGN_OR_RETURN(RowsByH d, SplitRows(ctx, x.shape()));
  const double eps = ctx.Attr<float>("epsilon");
  const float* px = x.data<float>();
  const float* scale = OptionalData(ctx, "Scale");
  const float* pmean = ctx.Input("Mean").data<float>();
  const float* pvar = ctx.Input("Variance").data<float>();
  const float* pdy = ctx.Input("Y@GRAD").data<float>();
  float* dx =
      ctx.HasOutput("X@GRAD") ? ctx.Output("X@GRAD")->data<float>() : nullptr;
  float* dscale = ctx.HasOutput("Scale@GRAD")
                      ? ctx.Output("Scale@GRAD")->data<float>()
                      : nullptr;
  float* dbias = ctx.HasOutput("Bias@GRAD")
                     ? ctx.Output("Bias@GRAD")->data<float>()
                     : nullptr;
  // Row sums for Scale and Bias, in double and in row order.
  std::vector<double> acc_scale(dscale ? d.h : 0, 0.0);
  std::vector<double> acc_bias(dbias ? d.h : 0, 0.0);
  std::vector<double> xhat(d.h);
  for (int64_t r = 0; r < d.rows; ++r) {
    const float* xr = px + r * d.h;
    const float* dyr = pdy + r * d.h;
    const double mean = pmean[r];
    const double rstd = 1.0 / std::sqrt(pvar[r] + eps);
    for (int64_t j = 0; j < d.h; ++j) xhat[j] = (xr[j] - mean) * rstd;
    if (dscale) {
      for (int64_t j = 0; j < d.h; ++j) acc_scale[j] += dyr[j] * xhat[j];
    }
    if (dbias) {
      for (int64_t j = 0; j < d.h; ++j) acc_bias[j] += dyr[j];
    }
    if (!dx) continue;
    double sum_g = 0.0, sum_gx = 0.0;
    for (int64_t j = 0; j < d.h; ++j) {
      const double g = scale ? double{dyr[j]} * scale[j] : double{dyr[j]};
      sum_g += g;
      sum_gx += g * xhat[j];
    }
    const double mean_g = sum_g / d.h;
    const double mean_gx = sum_gx / d.h;
    float* dxr = dx + r * d.h;
    for (int64_t j = 0; j < d.h; ++j) {
      const double g = scale ? double{dyr[j]} * scale[j] : double{dyr[j]};
      dxr[j] = static_cast<float>(rstd * (g - mean_g - xhat[j] * mean_gx));
    }
  }
  for (int64_t j = 0; dscale && j < d.h; ++j) {
    dscale[j] = static_cast<float>(acc_scale[j]);
  }
  for (int64_t j = 0; dbias && j < d.h; ++j) {
    dbias[j] = static_cast<float>(acc_bias[j]);
  }
  return Status::OK();
}

}  // namespace

void RegisterLayerNormCpuKernels() {
  auto& r = KernelRegistry::Cpu();
  r.Register("layer_norm", LayerNormKernel);
  r.Register("layer_norm_grad", LayerNormGradKernel);
}

}  // namespace loom
