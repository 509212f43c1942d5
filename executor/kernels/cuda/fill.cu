// CUDA kernels for fill_constant.
#include "executor/kernels/cuda/launchers.h"

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

}  // namespace

void LaunchFillFloat(float* out, int64_t n, float value, cudaStream_t s) {
  if (n > 0) FillKernel<float><<<GridFor(n), kBlock, 0, s>>>(out, n, value);
}

void LaunchFillInt64(int64_t* out, int64_t n, int64_t value, cudaStream_t s) {
  if (n > 0) FillKernel<int64_t><<<GridFor(n), kBlock, 0, s>>>(out, n, value);
}

void LaunchFillInt32(int32_t* out, int64_t n, int32_t value, cudaStream_t s) {
  if (n > 0) FillKernel<int32_t><<<GridFor(n), kBlock, 0, s>>>(out, n, value);
}

}  // namespace cuda
}  // namespace loom
