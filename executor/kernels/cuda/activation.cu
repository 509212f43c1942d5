// CUDA kernels for gelu and relu and their gradients: the CPU kernels'
// formulas (kernels/cpu/activation.cc), element by element, in float on
// every storage type (dtype_access.cuh).
#include "executor/kernels/cuda/dtype_access.cuh"

namespace loom {
namespace cuda {
namespace {

constexpr float kSqrtHalf = 0.70710678118654752f;     // 1 / sqrt(2)
constexpr float kInvSqrt2Pi = 0.39894228040143268f;   // 1 / sqrt(2 pi)
constexpr float kSqrt2OverPi = 0.79788456080286536f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;

template <typename T>
__global__ void GeluKernel(const T* x, T* out, int64_t n, bool approximate) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = Load(x, i);
    if (approximate) {
      const float u = kSqrt2OverPi * (v + kGeluCubic * v * v * v);
      Store(out, i, 0.5f * v * (1.0f + tanhf(u)));
    } else {
      Store(out, i, 0.5f * v * (1.0f + erff(v * kSqrtHalf)));
    }
  }
}

template <typename T>
__global__ void GeluGradKernel(const T* x, const T* dout, T* dx, int64_t n, bool approximate) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = Load(x, i);
    if (approximate) {
      // d/dx 0.5 x (1 + tanh u) = 0.5 (1 + t) + 0.5 x (1 - t^2) u'.
      const float t = tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
      const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
      Store(dx, i, Load(dout, i) * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du));
    } else {
      // d/dx x Phi(x) = Phi(x) + x phi(x).
      const float cdf = 0.5f * (1.0f + erff(v * kSqrtHalf));
      const float pdf = kInvSqrt2Pi * expf(-0.5f * v * v);
      Store(dx, i, Load(dout, i) * (cdf + v * pdf));
    }
  }
}

template <typename T>
__global__ void ReluKernel(const T* x, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = Load(x, i);
    Store(out, i, v > 0.0f ? v : 0.0f);
  }
}

template <typename T>
__global__ void ReluGradKernel(const T* out, const T* dout, T* dx, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    Store(dx, i, Load(out, i) > 0.0f ? Load(dout, i) : 0.0f);
  }
}

}  // namespace

void LaunchGelu(FloatType t, const void* x, void* out, int64_t n, bool approximate,
                cudaStream_t s) {
  if (n <= 0) return;
  WithStorageType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    GeluKernel<<<GridFor(n), kBlock, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(out), n,
                                             approximate);
  });
}

void LaunchGeluGrad(FloatType t, const void* x, const void* dout, void* dx, int64_t n,
                    bool approximate, cudaStream_t s) {
  if (n <= 0) return;
  WithStorageType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    GeluGradKernel<<<GridFor(n), kBlock, 0, s>>>(static_cast<const T*>(x),
                                                 static_cast<const T*>(dout), static_cast<T*>(dx),
                                                 n, approximate);
  });
}

void LaunchRelu(FloatType t, const void* x, void* out, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  WithStorageType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    ReluKernel<<<GridFor(n), kBlock, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(out), n);
  });
}

void LaunchReluGrad(FloatType t, const void* out, const void* dout, void* dx, int64_t n,
                    cudaStream_t s) {
  if (n <= 0) return;
  WithStorageType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    ReluGradKernel<<<GridFor(n), kBlock, 0, s>>>(static_cast<const T*>(out),
                                                 static_cast<const T*>(dout), static_cast<T*>(dx),
                                                 n);
  });
}

}  // namespace cuda
}  // namespace loom
