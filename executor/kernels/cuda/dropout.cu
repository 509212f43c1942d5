// CUDA kernels for dropout and dropout_grad. The mask is the CPU's
// (kernels/cpu/dropout.cc): every element draws from framework/
// counter_rng.h, keyed by its global row and its index in the full row,
// so each element is computed on its own, in any order.
#include "executor/kernels/cuda/launchers.h"
#include "framework/counter_rng.h"

namespace loom {
namespace cuda {
namespace {

__global__ void DropoutKernel(DropoutPlan p, const float* x, bool* mask, float* out) {
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
    if (out) out[e] = keep ? x[e] * p.scale : 0.0f;
  }
}

__global__ void DropoutPassKernel(const float* x, bool* mask, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    if (mask) mask[i] = true;
    if (out) out[i] = x[i];
  }
}

__global__ void DropoutGradKernel(const bool* mask, const float* dout, float* dx, int64_t n,
                                  float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    dx[i] = mask[i] ? dout[i] * scale : 0.0f;
  }
}

}  // namespace

void LaunchDropout(const DropoutPlan& plan, const float* x, bool* mask, float* out,
                   cudaStream_t s) {
  const int64_t n = plan.rows * plan.row_len;
  if (n > 0) DropoutKernel<<<GridFor(n), kBlock, 0, s>>>(plan, x, mask, out);
}

void LaunchDropoutPass(const float* x, bool* mask, float* out, int64_t n, cudaStream_t s) {
  if (n > 0) DropoutPassKernel<<<GridFor(n), kBlock, 0, s>>>(x, mask, out, n);
}

void LaunchDropoutGrad(const bool* mask, const float* dout, float* dx, int64_t n, float scale,
                       cudaStream_t s) {
  if (n > 0) DropoutGradKernel<<<GridFor(n), kBlock, 0, s>>>(mask, dout, dx, n, scale);
}

}  // namespace cuda
}  // namespace loom
