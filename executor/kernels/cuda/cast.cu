// CUDA kernel for cast between fp32, fp16 and bf16: CUDA's own
// round-to-nearest-even conversions (dtype_access.cuh).
#include "executor/kernels/cuda/dtype_access.cuh"

namespace loom {
namespace cuda {
namespace {

template <typename From, typename To>
__global__ void CastKernel(const From* x, To* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    Store(out, i, Load(x, i));
  }
}

}  // namespace

bool LaunchCast(FloatType from, const void* x, FloatType to, void* out, int64_t n,
                cudaStream_t s) {
  if (n == 0) return true;
  bool launched = false;
  WithStorageType(from, [&](auto from_tag) {
    using From = typename decltype(from_tag)::type;
    launched = WithStorageType(to, [&](auto to_tag) {
      using To = typename decltype(to_tag)::type;
      CastKernel<<<GridFor(n), kBlock, 0, s>>>(static_cast<const From*>(x), static_cast<To*>(out),
                                               n);
    });
  });
  return launched;
}

}  // namespace cuda
}  // namespace loom
