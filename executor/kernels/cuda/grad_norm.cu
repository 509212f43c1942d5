// CUDA kernels for squared_l2_norm and grad_scale. The sum of squares runs
// in double through a fixed number of blocks, each over a fixed stride of
// the elements, and the blocks' partial sums are added in block order by
// one thread: the same bits on every run.
#include "executor/kernels/cuda/launchers.h"
#include "framework/grad_scale.h"

namespace loom {
namespace cuda {
namespace {

__global__ void ClearSumKernel(double* sum) { *sum = 0; }

__global__ void PartialSquaresKernel(const float* x, int64_t n, double* partial) {
  __shared__ double lanes[kBlock];
  double acc = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const double v = x[i];
    acc += v * v;
  }
  lanes[threadIdx.x] = acc;
  __syncthreads();
  for (int width = blockDim.x / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) lanes[threadIdx.x] += lanes[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = lanes[0];
}

__global__ void AddPartialsKernel(const double* partial, int blocks, double* sum) {
  double acc = *sum;
  for (int b = 0; b < blocks; ++b) acc += partial[b];
  *sum = acc;
}

__global__ void StoreSumKernel(const double* sum, float* out) { *out = static_cast<float>(*sum); }

__global__ void GradScaleKernel(const float* squared, const float* loss_scale, float max_norm,
                                float* scale, float* norm) {
  const GradScaleResult r =
      GradScaleOf(*squared, loss_scale != nullptr ? *loss_scale : 1.0f, max_norm);
  *scale = r.scale;
  if (norm != nullptr) *norm = r.norm;
}

__global__ void UpdateLossScaleKernel(const float* squared, int64_t growth_interval,
                                      const float* scale, const int64_t* good, float* scale_out,
                                      int64_t* good_out) {
  float s = *scale;
  int64_t g = *good;
  UpdateLossScale(*squared, growth_interval, &s, &g);
  *scale_out = s;
  *good_out = g;
}

}  // namespace

void LaunchUpdateLossScale(const float* squared, int64_t growth_interval, const float* scale,
                           const int64_t* good, float* scale_out, int64_t* good_out,
                           cudaStream_t s) {
  UpdateLossScaleKernel<<<1, 1, 0, s>>>(squared, growth_interval, scale, good, scale_out,
                                        good_out);
}

void LaunchClearSum(double* sum, cudaStream_t s) { ClearSumKernel<<<1, 1, 0, s>>>(sum); }

void LaunchAddSquares(const float* x, int64_t n, double* partial, double* sum, cudaStream_t s) {
  if (n <= 0) return;
  PartialSquaresKernel<<<kNormBlocks, kBlock, 0, s>>>(x, n, partial);
  AddPartialsKernel<<<1, 1, 0, s>>>(partial, kNormBlocks, sum);
}

void LaunchStoreSum(const double* sum, float* out, cudaStream_t s) {
  StoreSumKernel<<<1, 1, 0, s>>>(sum, out);
}

void LaunchGradScale(const float* squared, const float* loss_scale, float max_norm, float* scale,
                     float* norm, cudaStream_t s) {
  GradScaleKernel<<<1, 1, 0, s>>>(squared, loss_scale, max_norm, scale, norm);
}

}  // namespace cuda
}  // namespace loom
