// CUDA kernels for fill_constant: a value stored in every element, rounded
// once for a 16-bit float type (dtype_access.cuh).
#include "executor/kernels/cuda/dtype_access.cuh"

namespace loom {
namespace cuda {
namespace {

template <typename T>
__global__ void FillKernel(T* out, int64_t n, T value) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = value;
  }
}

// The value is rounded by each thread (the same bits in every element).
template <typename T>
__global__ void FillRoundedKernel(T* out, int64_t n, float value) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    Store(out, i, value);
  }
}

}  // namespace

void LaunchFillFloat(FloatType t, void* out, int64_t n, float value, cudaStream_t s) {
  if (n <= 0) return;
  if (t == kFp32) {
    FillKernel<float><<<GridFor(n), kBlock, 0, s>>>(static_cast<float*>(out), n, value);
    return;
  }
  WithStorageType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    FillRoundedKernel<<<GridFor(n), kBlock, 0, s>>>(static_cast<T*>(out), n, value);
  });
}

void LaunchFillInt64(int64_t* out, int64_t n, int64_t value, cudaStream_t s) {
  if (n > 0) FillKernel<int64_t><<<GridFor(n), kBlock, 0, s>>>(out, n, value);
}

void LaunchFillInt32(int32_t* out, int64_t n, int32_t value, cudaStream_t s) {
  if (n > 0) FillKernel<int32_t><<<GridFor(n), kBlock, 0, s>>>(out, n, value);
}

}  // namespace cuda
}  // namespace loom
