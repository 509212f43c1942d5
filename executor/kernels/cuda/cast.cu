// CUDA kernel for cast between fp32, fp16 and bf16: CUDA's own
// round-to-nearest-even conversions.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "executor/kernels/cuda/launchers.h"

namespace loom {
namespace cuda {
namespace {

__device__ float Load(const float* p, int64_t i) { return p[i]; }
__device__ float Load(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ float Load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ void Store(float* p, int64_t i, float v) { p[i] = v; }
__device__ void Store(__half* p, int64_t i, float v) { p[i] = __float2half_rn(v); }
__device__ void Store(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }

template <typename From, typename To>
__global__ void CastKernel(const From* x, To* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    Store(out, i, Load(x, i));
  }
}

template <typename From>
bool LaunchFrom(const From* x, CastDtype to, void* out, int64_t n, cudaStream_t s) {
  switch (to) {
    case kCastFp32:
      CastKernel<<<GridFor(n), kBlock, 0, s>>>(x, static_cast<float*>(out), n);
      return true;
    case kCastFp16:
      CastKernel<<<GridFor(n), kBlock, 0, s>>>(x, static_cast<__half*>(out), n);
      return true;
    case kCastBf16:
      CastKernel<<<GridFor(n), kBlock, 0, s>>>(x, static_cast<__nv_bfloat16*>(out), n);
      return true;
  }
  return false;
}

}  // namespace

bool LaunchCast(CastDtype from, const void* x, CastDtype to, void* out, int64_t n,
                cudaStream_t s) {
  if (n == 0) return true;
  switch (from) {
    case kCastFp32: return LaunchFrom(static_cast<const float*>(x), to, out, n, s);
    case kCastFp16: return LaunchFrom(static_cast<const __half*>(x), to, out, n, s);
    case kCastBf16: return LaunchFrom(static_cast<const __nv_bfloat16*>(x), to, out, n, s);
  }
  return false;
}

}  // namespace cuda
}  // namespace loom
