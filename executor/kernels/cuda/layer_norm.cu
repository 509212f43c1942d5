// CUDA kernels for layer_norm and layer_norm_grad: X as [rows, h], one
// block per row, sums in double like the CPU kernels, over a fixed tree so
// that a rerun gives the same bits. Any h: threads stride over the row.
// X, Y and their gradients are of the storage type T (dtype_access.cuh);
// Scale, Bias, Mean, Variance and their gradients are fp32 for every T.
#include "executor/kernels/cuda/dtype_access.cuh"

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

template <typename T>
__global__ void LayerNormKernel(const T* x, const float* scale, const float* bias, T* y,
                                float* mean_out, float* var_out, int64_t rows, int64_t h,
                                double eps) {
  __shared__ double buf[kBlock];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * h;
    T* yr = y + r * h;
    // Two passes: the one-pass E[x^2] - E[x]^2 cancels badly.
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) sum += Load(xr, j);
    const double mean = BlockSum(sum, buf) / h;
    double sq = 0.0;
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
      const double c = Load(xr, j) - mean;
      sq += c * c;
    }
    const double var = BlockSum(sq, buf) / h;
    const double rstd = 1.0 / sqrt(var + eps);
    if (threadIdx.x == 0) {
      if (mean_out) mean_out[r] = static_cast<float>(mean);
      if (var_out) var_out[r] = static_cast<float>(var);
    }
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
      float v = static_cast<float>((Load(xr, j) - mean) * rstd);
      if (scale) v *= scale[j];
      if (bias) v += bias[j];
      Store(yr, j, v);
    }
  }
}

// dX = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dY * Scale.
template <typename T>
__global__ void LayerNormGradXKernel(const T* x, const float* scale, const float* mean_in,
                                     const float* var_in, const T* dy, T* dx, int64_t rows,
                                     int64_t h, double eps) {
  __shared__ double buf[kBlock];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * h;
    const T* dyr = dy + r * h;
    const double mean = mean_in[r];
    const double rstd = 1.0 / sqrt(var_in[r] + eps);
    double sum_g = 0.0, sum_gx = 0.0;
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
      const double g = scale ? double{Load(dyr, j)} * scale[j] : double{Load(dyr, j)};
      sum_g += g;
      sum_gx += g * ((Load(xr, j) - mean) * rstd);
    }
    const double mean_g = BlockSum(sum_g, buf) / h;
    const double mean_gx = BlockSum(sum_gx, buf) / h;
    T* dxr = dx + r * h;
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
      const double g = scale ? double{Load(dyr, j)} * scale[j] : double{Load(dyr, j)};
      const double xhat = (Load(xr, j) - mean) * rstd;
      Store(dxr, j, static_cast<float>(rstd * (g - mean_g - xhat * mean_gx)));
    }
  }
}

// Partial column sums of dY * xhat and dY over each chunk of rows, in row
// order: partial[c * h + j] (scale) and partial[(chunks + c) * h + j] (bias).
template <typename T>
__global__ void LayerNormGradPartialKernel(const T* x, const float* mean_in,
                                           const float* var_in, const T* dy, double* partial,
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
      const float d = Load(dy, r * h + j);
      if (want_scale) acc_scale += d * ((Load(x, r * h + j) - double{mean_in[r]}) * rstd);
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

void LaunchLayerNorm(FloatType t, const void* x, const float* scale, const float* bias, void* y,
                     float* mean, float* var, int64_t rows, int64_t h, double eps,
                     cudaStream_t s) {
  if (rows <= 0 || h <= 0) return;
  WithStorageType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    LayerNormKernel<<<GridFor(rows, 1), kBlock, 0, s>>>(
        static_cast<const T*>(x), scale, bias, static_cast<T*>(y), mean, var, rows, h, eps);
  });
}

int64_t LayerNormGradChunks(int64_t rows) { return (rows + kRowsPerChunk - 1) / kRowsPerChunk; }

void LaunchLayerNormGrad(FloatType t, const void* x, const float* scale, const float* mean,
                         const float* var, const void* dy, void* dx, float* dscale, float* dbias,
                         double* partial, int64_t rows, int64_t h, double eps, cudaStream_t s) {
  if (h <= 0) return;
  WithStorageType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = static_cast<const T*>(x);
    const T* pdy = static_cast<const T*>(dy);
    if (dx && rows > 0) {
      LayerNormGradXKernel<<<GridFor(rows, 1), kBlock, 0, s>>>(
          px, scale, mean, var, pdy, static_cast<T*>(dx), rows, h, eps);
    }
    if (!dscale && !dbias) return;
    const int64_t chunks = LayerNormGradChunks(rows);
    if (chunks > 0) {
      LayerNormGradPartialKernel<<<GridFor(chunks * h), kBlock, 0, s>>>(
          px, mean, var, pdy, partial, dscale != nullptr, dbias != nullptr, rows, h, chunks, eps);
    }
    LayerNormGradFinishKernel<<<GridFor(h), kBlock, 0, s>>>(partial, dscale, dbias, h, chunks);
  });
}

}  // namespace cuda
}  // namespace loom
