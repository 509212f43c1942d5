// How the CUDA kernels read and write the float storage types: float,
// __half (fp16) and __nv_bfloat16 (bf16). A kernel is a template over the
// storage type T; it loads every element into float, computes in float
// and stores through Store, which rounds a 16-bit T to nearest even, once
// per store: the CPU's semantics (executor/fp32_shim.h). For T = float,
// Load and Store are plain accesses, so the fp32 instantiation of a kernel
// does exactly what the untemplated kernel did. Included by the .cu files
// only (nvcc).
#ifndef LOOM_EXECUTOR_KERNELS_CUDA_DTYPE_ACCESS_CUH_
#define LOOM_EXECUTOR_KERNELS_CUDA_DTYPE_ACCESS_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "executor/kernels/cuda/launchers.h"

namespace loom {
namespace cuda {

__device__ __forceinline__ float Load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float Load(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ float Load(const __nv_bfloat16* p, int64_t i) {
  return __bfloat162float(p[i]);
}

__device__ __forceinline__ void Store(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void Store(__half* p, int64_t i, float v) { p[i] = __float2half_rn(v); }
__device__ __forceinline__ void Store(__nv_bfloat16* p, int64_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}

// Names a storage type on the host, where a launcher picks the kernel's
// instantiation: fn(StorageTag<T>{}) with `using T = typename
// decltype(tag)::type`.
template <typename T>
struct StorageTag {
  using type = T;
};

// Calls fn with the tag of `type`'s storage type; false (and no call) for
// a value that names none, which the host side never passes.
template <typename Fn>
bool WithStorageType(FloatType type, Fn&& fn) {
  switch (type) {
    case kFp32:
      fn(StorageTag<float>{});
      return true;
    case kFp16:
      fn(StorageTag<__half>{});
      return true;
    case kBf16:
      fn(StorageTag<__nv_bfloat16>{});
      return true;
  }
  return false;
}

}  // namespace cuda
}  // namespace loom

#endif  // LOOM_EXECUTOR_KERNELS_CUDA_DTYPE_ACCESS_CUH_
