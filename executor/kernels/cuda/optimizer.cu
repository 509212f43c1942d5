// CUDA kernels for sgd and adamw. Outputs may alias their inputs (updates
// run in place): each element is read before it is written, and the beta
// powers are advanced by a second kernel, after every thread has read them.
#include "executor/kernels/cuda/launchers.h"

namespace loom {
namespace cuda {
namespace {

// GradScale's value, 1 without it (exact: no GradScale keeps the bits).
__device__ float GradFactor(const float* grad_scale) {
  return grad_scale != nullptr ? *grad_scale : 1.0f;
}

// A skipped update's output: its input, copied unless in place.
__device__ void Keep(const float* in, float* out, int64_t i) {
  if (out != in) out[i] = in[i];
}

__global__ void SgdKernel(const float* p, const float* g, const float* lr,
                          const float* grad_scale, float* out, int64_t n) {
  const float rate = *lr;
  const float factor = GradFactor(grad_scale);
  const bool skip = !isfinite(factor);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    if (skip) {
      Keep(p, out, i);
    } else {
      out[i] = p[i] - rate * (g[i] * factor);
    }
  }
}

__global__ void AdamWKernel(AdamWArgs a, const float* p, const float* g, const float* m,
                            const float* v, float* p_out, float* m_out, float* v_out, int64_t n) {
  const float lr = *a.lr;
  // Bias corrections folded into per-step scalars, as on the CPU.
  const float step = static_cast<float>(lr / (1.0 - static_cast<double>(*a.beta1_pow)));
  const float inv_c2 = static_cast<float>(1.0 / (1.0 - static_cast<double>(*a.beta2_pow)));
  const float decay = 1.0f - lr * a.weight_decay;
  const float factor = GradFactor(a.grad_scale);
  const bool skip = !isfinite(factor);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    if (skip) {
      Keep(p, p_out, i);
      Keep(m, m_out, i);
      Keep(v, v_out, i);
      continue;
    }
    const float gi = g[i] * factor;
    const float mi = a.beta1 * m[i] + (1.0f - a.beta1) * gi;
    const float vi = a.beta2 * v[i] + (1.0f - a.beta2) * gi * gi;
    const float pi = p[i] * decay;
    m_out[i] = mi;
    v_out[i] = vi;
    p_out[i] = pi - step * mi / (sqrtf(vi * inv_c2) + a.epsilon);
  }
}

__global__ void AdvancePowsKernel(AdamWArgs a) {
  const float b1 = *a.beta1_pow, b2 = *a.beta2_pow;
  const bool skip = !isfinite(GradFactor(a.grad_scale));
  *a.beta1_pow_out = skip ? b1 : b1 * a.beta1;
  *a.beta2_pow_out = skip ? b2 : b2 * a.beta2;
}

}  // namespace

void LaunchSgd(const float* param, const float* grad, const float* lr, const float* grad_scale,
               float* out, int64_t n, cudaStream_t s) {
  if (n > 0) SgdKernel<<<GridFor(n), kBlock, 0, s>>>(param, grad, lr, grad_scale, out, n);
}

void LaunchAdamW(const AdamWArgs& a, const float* param, const float* grad, const float* m,
                 const float* v, float* param_out, float* m_out, float* v_out, int64_t n,
                 cudaStream_t s) {
  if (n > 0) {
    AdamWKernel<<<GridFor(n), kBlock, 0, s>>>(a, param, grad, m, v, param_out, m_out, v_out, n);
  }
  AdvancePowsKernel<<<1, 1, 0, s>>>(a);
}

}  // namespace cuda
}  // namespace loom
