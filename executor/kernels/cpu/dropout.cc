// CPU kernels for dropout and dropout_grad.
#include "executor/kernels/cpu/cpu_helpers.h"

namespace loom {
namespace {

// splitmix64's finalizer: a bijective 64-bit mix with full avalanche.
uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) from (seed, i) alone: element i of a splitmix64 stream
// keyed by the mixed seed. No state, so any element can be computed on its
// own (and on any device) with the same result.
double UniformAt(uint64_t key, uint64_t i) {
  constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
  const uint64_t h = Mix64(key + (i + 1) * kGolden);
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

float KeptScale(const KernelContext& ctx) {
  const float p = ctx.Attr<float>("dropout_prob");
  return ctx.Attr<bool>("is_test") ? 1.0f : 1.0f / (1.0f - p);
}

Status DropoutKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  if (x.dtype() != proto::FP32) {
    return Unimplemented("dropout of ", DataTypeName(x.dtype()));
  }
  const float p = ctx.Attr<float>("dropout_prob");
  const bool pass = ctx.Attr<bool>("is_test") || p == 0.0f;
  const float scale = KeptScale(ctx);
  const uint64_t key = Mix64(static_cast<uint64_t>(ctx.Attr<int64_t>("seed")));
  const float* px = x.data<float>();
  const int64_t n = x.numel();
  // Mask is an output like any other, so it may be pruned.
  bool* mask =
      ctx.HasOutput("Mask") ? ctx.Output("Mask")->data<bool>() : nullptr;
  float* out =
      ctx.HasOutput("Out") ? ctx.Output("Out")->data<float>() : nullptr;
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = pass || UniformAt(key, i) >= p;
    if (mask) mask[i] = keep;
    if (out) out[i] = pass ? px[i] : (keep ? px[i] * scale : 0.0f);
  }
  return Status::OK();
}

Status DropoutGradKernel(const KernelContext& ctx) {
  const Tensor& dout = ctx.Input("Out@GRAD");
  if (dout.dtype() != proto::FP32) {
    return Unimplemented("dropout_grad of ", DataTypeName(dout.dtype()));
  }
  const bool* mask = ctx.Input("Mask").data<bool>();
  const float* g = dout.data<float>();
  float* dx = ctx.Output("X@GRAD")->data<float>();
  const float scale = KeptScale(ctx);
  for (int64_t i = 0, n = dout.numel(); i < n; ++i) {
    dx[i] = mask[i] ? g[i] * scale : 0.0f;
  }
  return Status::OK();
}

}  // namespace

void RegisterDropoutCpuKernels() {
  auto& r = KernelRegistry::Cpu();
  r.Register("dropout", DropoutKernel);
  r.Register("dropout_grad", DropoutGradKernel);
}

}  // namespace loom
