// CPU kernels for elementwise_{add,sub,mul}, scale and sum.
#include <cstring>

#include "executor/kernels/cpu/cpu_helpers.h"

namespace loom {
namespace {

template <typename Fn>
Status Binary(const KernelContext& ctx, Fn fn) {
  const Tensor& x = ctx.Input("X");
  const Tensor& y = ctx.Input("Y");
  Tensor* out = ctx.Output("Out");
  const float* px = x.data<float>();
  const float* py = y.data<float>();
  float* po = out->data<float>();
  if (x.shape() == y.shape()) {
    for (int64_t i = 0, n = x.numel(); i < n; ++i) po[i] = fn(px[i], py[i]);
    return Status::OK();
  }
  ForEachBroadcast(out->shape(), BroadcastStrides(x.shape(), out->shape()),
                   BroadcastStrides(y.shape(), out->shape()),
                   [&](int64_t i, int64_t a, int64_t b) {
                     po[i] = fn(px[a], py[b]);
                   });
  return Status::OK();
}

Status AddKernel(const KernelContext& ctx) {
  return Binary(ctx, [](float a, float b) { return a + b; });
}
Status SubKernel(const KernelContext& ctx) {
  return Binary(ctx, [](float a, float b) { return a - b; });
}
Status MulKernel(const KernelContext& ctx) {
  return Binary(ctx, [](float a, float b) { return a * b; });
}

// add_grad and sub_grad: dX = sum-to-shape(dOut), dY = sign * the same.
Status AddSubGrad(const KernelContext& ctx, float y_sign) {
  const Tensor& dout = ctx.Input("Out@GRAD");
  if (ctx.HasOutput("X@GRAD")) {
    Tensor* dx = ctx.Output("X@GRAD");
    ReduceToShape(dout.data<float>(), dout.shape(), dx->shape(),
                  dx->data<float>());
  }
  if (ctx.HasOutput("Y@GRAD")) {
    Tensor* dy = ctx.Output("Y@GRAD");
    float* p = dy->data<float>();
    ReduceToShape(dout.data<float>(), dout.shape(), dy->shape(), p);
    if (y_sign != 1.0f) {
      for (int64_t i = 0, n = dy->numel(); i < n; ++i) p[i] *= y_sign;
    }
  }
  return Status::OK();
}

Status AddGradKernel(const KernelContext& ctx) { return AddSubGrad(ctx, 1.0f); }
Status SubGradKernel(const KernelContext& ctx) { return AddSubGrad(ctx, -1.0f); }

Status MulGradKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const Tensor& y = ctx.Input("Y");
  const Tensor& dout = ctx.Input("Out@GRAD");
  const float* px = x.data<float>();
  const float* py = y.data<float>();
  const float* pg = dout.data<float>();
  const Shape& out = dout.shape();
  auto sx = BroadcastStrides(x.shape(), out);
  auto sy = BroadcastStrides(y.shape(), out);
  float* dx = nullptr;
  float* dy = nullptr;
  if (ctx.HasOutput("X@GRAD")) {
    dx = ctx.Output("X@GRAD")->data<float>();
    std::memset(dx, 0, sizeof(float) * x.numel());
  }
  if (ctx.HasOutput("Y@GRAD")) {
    dy = ctx.Output("Y@GRAD")->data<float>();
    std::memset(dy, 0, sizeof(float) * y.numel());
  }
  ForEachBroadcast(out, sx, sy, [&](int64_t i, int64_t a, int64_t b) {
    if (dx) dx[a] += pg[i] * py[b];
    if (dy) dy[b] += pg[i] * px[a];
  });
  return Status::OK();
}

Status ScaleKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  Tensor* out = ctx.Output("Out");
  const float s = ctx.Attr<float>("scale");
  const float b = ctx.Attr<float>("bias");
  const float* px = x.data<float>();
  float* po = out->data<float>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) po[i] = s * px[i] + b;
  return Status::OK();
}

Status SumKernel(const KernelContext& ctx) {
  Tensor* out = ctx.Output("Out");
  float* po = out->data<float>();
  const int64_t n = out->numel();
  const int count = ctx.InputCount("X");
  // Copy first: Out may alias X[0] (in-place accumulation).
  std::vector<const float*> in(count);
  for (int k = 0; k < count; ++k) in[k] = ctx.Input("X", k).data<float>();
  for (int64_t i = 0; i < n; ++i) {
    float acc = in[0][i];
    for (int k = 1; k < count; ++k) acc += in[k][i];
    po[i] = acc;
  }
  return Status::OK();
}

}  // namespace

void RegisterElementwiseCpuKernels() {
  auto& r = KernelRegistry::Cpu();
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
