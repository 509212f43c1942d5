// CUDA kernels for dropout and dropout_grad. The mask is the CPU's
// (kernels/cpu/dropout.cc): every element draws from framework/
// counter_rng.h, keyed by its global row and its index in the full row,
// so each element is computed on its own, in any order. X, Out and their
// gradients are of the storage type T (dtype_access.cuh); the mask is
// bool.
#include "executor/kernels/cuda/dtype_access.cuh"
#include "framework/counter_rng.h"

namespace loom {
namespace cuda {
namespace {

template <typename T>
__global__ void DropoutKernel(DropoutPlan p, const T* x, bool* mask, T* out) {
  const int64_t n = p.rows * p.row_len;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = e / p.row_len;
    // The element's index in the full row, from its local coordinates.
    int64_t rest = e - r * p.row_len, j = p.first;
    for (int d = p.dims - 1; d >= 0; --d) {
      const int64_t c = rest % p.local[d];
      rest /= p.local[d];
      j += c * p.full_stride[d];
    }
    const uint64_t row_key = StreamAt(p.step_key, static_cast<uint64_t>(p.row_offset + r));
    const bool keep = ToUnit(StreamAt(row_key, static_cast<uint64_t>(j))) >= p.p;
    if (mask) mask[e] = keep;
    if (out) Store(out, e, keep ? Load(x, e) * p.scale : 0.0f);
  }
}

// out = x as stored: a copy of the bits.
template <typename T>
__global__ void DropoutPassKernel(const T* x, bool* mask, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    if (mask) mask[i] = true;
    if (out) out[i] = x[i];
  }
}

template <typename T>
__global__ void DropoutGradKernel(const bool* mask, const T* dout, T* dx, int64_t n, float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    Store(dx, i, mask[i] ? Load(dout, i) * scale : 0.0f);
  }
}

}  // namespace

void LaunchDropout(FloatType t, const DropoutPlan& plan, const void* x, bool* mask, void* out,
                   cudaStream_t s) {
  const int64_t n = plan.rows * plan.row_len;
  if (n <= 0) return;
  WithStorageType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    DropoutKernel<<<GridFor(n), kBlock, 0, s>>>(plan, static_cast<const T*>(x), mask,
                                                static_cast<T*>(out));
  });
}

void LaunchDropoutPass(FloatType t, const void* x, bool* mask, void* out, int64_t n,
                       cudaStream_t s) {
  if (n <= 0) return;
  WithStorageType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    DropoutPassKernel<<<GridFor(n), kBlock, 0, s>>>(static_cast<const T*>(x), mask,
                                                    static_cast<T*>(out), n);
  });
}

void LaunchDropoutGrad(FloatType t, const bool* mask, const void* dout, void* dx, int64_t n,
                       float scale, cudaStream_t s) {
  if (n <= 0) return;
  WithStorageType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    DropoutGradKernel<<<GridFor(n), kBlock, 0, s>>>(mask, static_cast<const T*>(dout),
                                                    static_cast<T*>(dx), n, scale);
  });
}

}  // namespace cuda
}  // namespace loom
