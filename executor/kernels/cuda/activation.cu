// CUDA kernels for gelu and relu and their gradients: the CPU kernels'
// formulas (kernels/cpu/activation.cc), element by element.
#include "executor/kernels/cuda/launchers.h"

namespace loom {
namespace cuda {
namespace {

constexpr float kSqrtHalf = 0.70710678118654752f;     // 1 / sqrt(2)
constexpr float kInvSqrt2Pi = 0.39894228040143268f;   // 1 / sqrt(2 pi)
constexpr float kSqrt2OverPi = 0.79788456080286536f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;

__global__ void GeluKernel(const float* x, float* out, int64_t n, bool approximate) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = x[i];
    if (approximate) {
      const float u = kSqrt2OverPi * (v + kGeluCubic * v * v * v);
      out[i] = 0.5f * v * (1.0f + tanhf(u));
    } else {
      out[i] = 0.5f * v * (1.0f + erff(v * kSqrtHalf));
    }
  }
}

__global__ void GeluGradKernel(const float* x, const float* dout, float* dx, int64_t n,
                               bool approximate) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = x[i];
    if (approximate) {
      // d/dx 0.5 x (1 + tanh u) = 0.5 (1 + t) + 0.5 x (1 - t^2) u'.
      const float t = tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
      const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
      dx[i] = dout[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
    } else {
      // d/dx x Phi(x) = Phi(x) + x phi(x).
      const float cdf = 0.5f * (1.0f + erff(v * kSqrtHalf));
      const float pdf = kInvSqrt2Pi * expf(-0.5f * v * v);
      dx[i] = dout[i] * (cdf + v * pdf);
    }
  }
}

__global__ void ReluKernel(const float* x, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = x[i] > 0.0f ? x[i] : 0.0f;
  }
}

__global__ void ReluGradKernel(const float* out, const float* dout, float* dx, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    dx[i] = out[i] > 0.0f ? dout[i] : 0.0f;
  }
}

}  // namespace

void LaunchGelu(const float* x, float* out, int64_t n, bool approximate, cudaStream_t s) {
  if (n > 0) GeluKernel<<<GridFor(n), kBlock, 0, s>>>(x, out, n, approximate);
}

void LaunchGeluGrad(const float* x, const float* dout, float* dx, int64_t n, bool approximate,
                    cudaStream_t s) {
  if (n > 0) GeluGradKernel<<<GridFor(n), kBlock, 0, s>>>(x, dout, dx, n, approximate);
}

void LaunchRelu(const float* x, float* out, int64_t n, cudaStream_t s) {
  if (n > 0) ReluKernel<<<GridFor(n), kBlock, 0, s>>>(x, out, n);
}

void LaunchReluGrad(const float* out, const float* dout, float* dx, int64_t n, cudaStream_t s) {
  if (n > 0) ReluGradKernel<<<GridFor(n), kBlock, 0, s>>>(out, dout, dx, n);
}

}  // namespace cuda
}  // namespace loom
