// CUDA kernels for fill_constant, gaussian_random and uniform_random (host
// side). The random fills draw on the host with the CPU kernel's generator
// (mt19937_64 and libstdc++'s distributions) and copy the values over: a
// seed gives the same parameters on either backend. They run once, at
// initialization, so the host work and the wait for the copy are cheap.
// bf16 and fp16 outputs get the fp32 values rounded to nearest even (on
// the host for the random fills, with the CPU's own conversion).
#include <random>
#include <vector>

#include "executor/kernels/cuda/cuda_kernel_helpers.h"
#include "framework/low_precision.h"

namespace loom {
namespace {

Status FillConstantKernel(const KernelContext& ctx) {
  Tensor* out = ctx.Output("Out");
  const float v = ctx.Attr<float>("value");
  const int64_t n = out->numel();
  switch (out->dtype()) {
    case proto::FP32:
    case proto::BF16:
    case proto::FP16:
      cuda::LaunchFillFloat(FloatTypeOf(out->dtype()), out->raw_data(), n, v, NativeStream(ctx));
      break;
    case proto::INT64:
      cuda::LaunchFillInt64(out->data<int64_t>(), n, static_cast<int64_t>(v), NativeStream(ctx));
      break;
    case proto::INT32:
      cuda::LaunchFillInt32(out->data<int32_t>(), n, static_cast<int32_t>(v), NativeStream(ctx));
      break;
    default:
      return Unimplemented("fill_constant of ", DataTypeName(out->dtype()), " on CUDA");
  }
  return LastLaunchStatus("fill_constant");
}

template <typename Dist>
Status FillRandom(const KernelContext& ctx, Dist dist) {
  Tensor* out = ctx.Output("Out");
  if (!IsComputeFloat(out->dtype())) {
    return Unimplemented(ctx.type(), " of ", DataTypeName(out->dtype()));
  }
  std::mt19937_64 rng(static_cast<uint64_t>(ctx.Attr<int64_t>("seed")));
  std::vector<float> values(out->numel());
  for (float& v : values) v = dist(rng);
  if (ctx.device() == nullptr) {
    return FailedPrecondition(ctx.type(), ": a CUDA fill needs the kernel's device");
  }
  const void* host = values.data();
  std::vector<uint16_t> rounded;
  if (out->dtype() != proto::FP32) {
    rounded.resize(values.size());
    NarrowFromFloat(out->dtype(), values.data(), out->numel(), rounded.data());
    host = rounded.data();
  }
  LOOM_RETURN_IF_ERROR(
      ctx.device()->CopyFromHost(out->raw_data(), host, out->bytes(), ctx.stream()));
  // The host buffers are pageable memory that dies here: wait for the copy.
  return ctx.stream()->Synchronize();
}

Status GaussianRandomKernel(const KernelContext& ctx) {
  return FillRandom(
      ctx, std::normal_distribution<float>(ctx.Attr<float>("mean"), ctx.Attr<float>("std")));
}

Status UniformRandomKernel(const KernelContext& ctx) {
  return FillRandom(
      ctx, std::uniform_real_distribution<float>(ctx.Attr<float>("min"), ctx.Attr<float>("max")));
}

}  // namespace

void RegisterFillCudaKernels() {
  auto& r = KernelRegistry::Cuda();
  r.Register("fill_constant", FillConstantKernel, LowPrecision::kNative);
  r.Register("gaussian_random", GaussianRandomKernel, LowPrecision::kNative);
  r.Register("uniform_random", UniformRandomKernel, LowPrecision::kNative);
}

}  // namespace loom
