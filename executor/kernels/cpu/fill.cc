// CPU kernels for fill_constant, gaussian_random and uniform_random.
#include <random>

#include "executor/kernels/cpu/cpu_helpers.h"

namespace loom {
namespace {

Status FillConstantKernel(const KernelContext& ctx) {
  Tensor* out = ctx.Output("Out");
  const float v = ctx.Attr<float>("value");
  const int64_t n = out->numel();
  switch (out->dtype()) {
    case proto::FP32: {
      float* p = out->data<float>();
      for (int64_t i = 0; i < n; ++i) p[i] = v;
      return Status::OK();
    }
    case proto::INT64: {
      int64_t* p = out->data<int64_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int64_t>(v);
      return Status::OK();
    }
    case proto::INT32: {
      int32_t* p = out->data<int32_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(v);
      return Status::OK();
    }
    default:
      return Unimplemented("fill_constant of ", DataTypeName(out->dtype()),
                           " on the CPU");
  }
}

template <typename Dist>
Status FillRandom(const KernelContext& ctx, Dist dist) {
  Tensor* out = ctx.Output("Out");
  if (out->dtype() != proto::FP32) {
    return Unimplemented(ctx.type(), " of ", DataTypeName(out->dtype()));
  }
  // mt19937_64 is specified by the standard, so a seed gives the same stream
  // everywhere; the distributions are libstdc++'s.
  std::mt19937_64 rng(static_cast<uint64_t>(ctx.Attr<int64_t>("seed")));
  float* p = out->data<float>();
  for (int64_t i = 0, n = out->numel(); i < n; ++i) p[i] = dist(rng);
  return Status::OK();
}

Status GaussianRandomKernel(const KernelContext& ctx) {
  return FillRandom(ctx, std::normal_distribution<float>(
                             ctx.Attr<float>("mean"), ctx.Attr<float>("std")));
}

Status UniformRandomKernel(const KernelContext& ctx) {
  return FillRandom(ctx, std::uniform_real_distribution<float>(
                             ctx.Attr<float>("min"), ctx.Attr<float>("max")));
}

}  // namespace

void RegisterFillCpuKernels() {
  auto& r = KernelRegistry::Cpu();
  r.Register("fill_constant", FillConstantKernel);
  r.Register("gaussian_random", GaussianRandomKernel);
  r.Register("uniform_random", UniformRandomKernel);
}

}  // namespace loom
