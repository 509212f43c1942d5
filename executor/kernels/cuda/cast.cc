// CUDA kernel for cast (host side).
#include "executor/kernels/cuda/cuda_kernel_helpers.h"

namespace loom {
namespace {

Status CastKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  Tensor* out = ctx.Output("Out");
  if (!IsComputeFloat(x.dtype()) || !IsComputeFloat(out->dtype())) {
    return Unimplemented("cast from ", DataTypeName(x.dtype()), " to ",
                         DataTypeName(out->dtype()), " on CUDA");
  }
  if (x.dtype() == out->dtype()) {
    return CopyOnDevice(ctx, out->raw_data(), x.raw_data(), x.bytes());
  }
  if (!cuda::LaunchCast(FloatTypeOf(x.dtype()), x.raw_data(), FloatTypeOf(out->dtype()),
                        out->raw_data(), x.numel(), NativeStream(ctx))) {
    return Internal("cast: no CUDA conversion from ", DataTypeName(x.dtype()), " to ",
                    DataTypeName(out->dtype()));
  }
  return LastLaunchStatus("cast");
}

}  // namespace

void RegisterCastCudaKernels() {
  KernelRegistry::Cuda().Register("cast", CastKernel, LowPrecision::kNative);
}

}  // namespace loom
