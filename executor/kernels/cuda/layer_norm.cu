// CUDA kernels for layer_norm and layer_norm_grad: X as [rows, h], one
// block per row, sums in double like the CPU kernels, over a fixed tree so
// that a rerun gives the same bits. Any h: threads stride over the row.
#include "executor/kernels/cuda/launchers.h"

namespace loom {
namespace cuda {
namespace {

// Rows of dScale/dBias partial sums per chunk (a constant, so the order of
// the column sums depends on the shape only).
constexpr int64_t kRowsPerChunk = 32;

// Sums `v` over the block with a fixed tree; every thread gets the total.
// `buf` holds kBlock doubles.
__device__ double BlockSum(double v, double* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int w = kBlock / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) buf[threadIdx.x] += buf[threadIdx.x + w];
    __syncthreads();
  }
  const double total = buf[0];
  __syncthreads();
  return total;
}

__global__ void LayerNormKernel(const float* x, const float* scale, const float* bias, float* y,
                                float* mean_out, float* var_out, int64_t rows, int64_t h,
                                double eps) {
  __shared__ double buf[kBlock];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * h;
    float* yr = y + r * h;
    // Two passes: the one-pass E[x^2] - E[x]^2 cancels badly.
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) sum += xr[j];
    const double mean = BlockSum(sum, buf) / h;
    double sq = 0.0;
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
      const double c = xr[j] - mean;
      sq += c * c;
    }
    const double var = BlockSum(sq, buf) / h;
    const double rstd = 1.0 / sqrt(var + eps);
    if (threadIdx.x == 0) {
      if (mean_out) mean_out[r] = static_cast<float>(mean);
      if (var_out) var_out[r] = static_cast<float>(var);
    }
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
      float v = static_cast<float>((xr[j] - mean) * rstd);
      if (scale) v *= scale[j];
      if (bias) v += bias[j];
      yr[j] = v;
    }
  }
}

// dX = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dY * Scale.
__global__ void LayerNormGradXKernel(const float* x, const float* scale, const float* mean_in,
                                     const float* var_in, const float* dy, float* dx, int64_t rows,
                                     int64_t h, double eps) {
  __shared__ double buf[kBlock];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * h;
    const float* dyr = dy + r * h;
    const double mean = mean_in[r];
    const double rstd = 1.0 / sqrt(var_in[r] + eps);
    double sum_g = 0.0, sum_gx = 0.0;
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
      const double g = scale ? double{dyr[j]} * scale[j] : double{dyr[j]};
      sum_g += g;
      sum_gx += g * ((xr[j] - mean) * rstd);
    }
    const double mean_g = BlockSum(sum_g, buf) / h;
    const double mean_gx = BlockSum(sum_gx, buf) / h;
    float* dxr = dx + r * h;
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
      const double g = scale ? double{dyr[j]} * scale[j] : double{dyr[j]};
      const double xhat = (xr[j] - mean) * rstd;
      dxr[j] = static_cast<float>(rstd * (g - mean_g - xhat * mean_gx));
    }
  }
}

// Partial column sums of dY * xhat and dY over each chunk of rows, in row
// order: partial[c * h + j] (scale) and partial[(chunks + c) * h + j] (bias).
__global__ void LayerNormGradPartialKernel(const float* x, const float* mean_in,
                                           const float* var_in, const float* dy, double* partial,
                                           bool want_scale, bool want_bias, int64_t rows, int64_t h,
                                           int64_t chunks, double eps) {
  const int64_t total = chunks * h;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = e / h, j = e - c * h;
    const int64_t end = min(rows, (c + 1) * kRowsPerChunk);
    double acc_scale = 0.0, acc_bias = 0.0;
    for (int64_t r = c * kRowsPerChunk; r < end; ++r) {
      const double rstd = 1.0 / sqrt(var_in[r] + eps);
      const float d = dy[r * h + j];
      if (want_scale) acc_scale += d * ((x[r * h + j] - double{mean_in[r]}) * rstd);
      if (want_bias) acc_bias += d;
    }
    if (want_scale) partial[e] = acc_scale;
    if (want_bias) partial[total + e] = acc_bias;
  }
}

__global__ void LayerNormGradFinishKernel(const double* partial, float* dscale, float* dbias,
                                          int64_t h, int64_t chunks) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < h;
       j += int64_t{gridDim.x} * blockDim.x) {
    double acc_scale = 0.0, acc_bias = 0.0;
    for (int64_t c = 0; c < chunks; ++c) {
      if (dscale) acc_scale += partial[c * h + j];
      if (dbias) acc_bias += partial[(chunks + c) * h + j];
    }
    if (dscale) dscale[j] = static_cast<float>(acc_scale);
    if (dbias) dbias[j] = static_cast<float>(acc_bias);
  }
}

}  // namespace

void LaunchLayerNorm(const float* x, const float* scale, const float* bias, float* y, float* mean,
                     float* var, int64_t rows, int64_t h, double eps, cudaStream_t s) {
  if (rows <= 0 || h <= 0) return;
  LayerNormKernel<<<GridFor(rows, 1), kBlock, 0, s>>>(x, scale, bias, y, mean, var, rows, h, eps);
}

int64_t LayerNormGradChunks(int64_t rows) { return (rows + kRowsPerChunk - 1) / kRowsPerChunk; }

void LaunchLayerNormGrad(const float* x, const float* scale, const float* mean, const float* var,
                         const float* dy, float* dx, float* dscale, float* dbias, double* partial,
                         int64_t rows, int64_t h, double eps, cudaStream_t s) {
  if (h <= 0) return;
  if (dx && rows > 0) {
    LayerNormGradXKernel<<<GridFor(rows, 1), kBlock, 0, s>>>(x, scale, mean, var, dy, dx, rows, h,
                                                             eps);
  }
  if (!dscale && !dbias) return;
  const int64_t chunks = LayerNormGradChunks(rows);
  if (chunks > 0) {
    LayerNormGradPartialKernel<<<GridFor(chunks * h), kBlock, 0, s>>>(
        x, mean, var, dy, partial, dscale != nullptr, dbias != nullptr, rows, h, chunks, eps);
  }
  LayerNormGradFinishKernel<<<GridFor(h), kBlock, 0, s>>>(partial, dscale, dbias, h, chunks);
}

}  // namespace cuda
}  // namespace loom
