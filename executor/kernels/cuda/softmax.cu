// CUDA kernels for softmax and the cross entropies, and their gradients
// (kernels/cpu/softmax.cc). A row along the last axis gets a block, with
// sums in double over a fixed tree; a row strided by inner > 1 gets a
// thread that walks it in order, as the CPU does. Softmax is a template
// over the storage type T (dtype_access.cuh); the cross entropies are
// fp32 only (AMP keeps the loss in fp32).
#include <cmath>
#include <type_traits>

#include "executor/kernels/cuda/dtype_access.cuh"

namespace loom {
namespace cuda {
namespace {

#define LOOM_GRID_STRIDE(i, n)                                              \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); \
       i += int64_t{gridDim.x} * blockDim.x)

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

__device__ float BlockMax(float v, float* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int w = kBlock / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) buf[threadIdx.x] = fmaxf(buf[threadIdx.x], buf[threadIdx.x + w]);
    __syncthreads();
  }
  const float m = buf[0];
  __syncthreads();
  return m;
}

__device__ int64_t Visible(bool causal, int64_t row, int64_t n, int64_t sq) {
  if (!causal) return n;
  const int64_t q = row % sq;
  return min(n, q + (n - sq) + 1);
}

template <typename T>
__global__ void SoftmaxRowKernel(const T* x, T* y, int64_t rows, int64_t n, bool causal,
                                 int64_t sq) {
  __shared__ double sums[kBlock];
  __shared__ float maxes[kBlock];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    const int64_t visible = Visible(causal, r, n, sq);
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < visible; j += blockDim.x) mx = fmaxf(mx, Load(xr, j));
    mx = BlockMax(mx, maxes);
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < visible; j += blockDim.x) sum += expf(Load(xr, j) - mx);
    const float inv = static_cast<float>(1.0 / BlockSum(sum, sums));
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      Store(yr, j, j < visible ? expf(Load(xr, j) - mx) * inv : 0.0f);
    }
  }
}

// Rows strided by inner: one thread each (never causal).
template <typename T>
__global__ void SoftmaxColumnKernel(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  LOOM_GRID_STRIDE(c, outer * inner) {
    const int64_t o = c / inner, i = c - o * inner;
    const T* xr = x + o * n * inner + i;
    T* yr = y + o * n * inner + i;
    float mx = Load(xr, 0);
    for (int64_t j = 1; j < n; ++j) mx = fmaxf(mx, Load(xr, j * inner));
    double sum = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      const float e = expf(Load(xr, j * inner) - mx);
      // fp32 keeps the exponentials in Y until they are scaled; a 16-bit Y
      // would round them twice, so they are made again below (the same
      // floats: expf of the same argument).
      if constexpr (std::is_same_v<T, float>) yr[j * inner] = e;
      sum += e;
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < n; ++j) {
      if constexpr (std::is_same_v<T, float>) {
        yr[j * inner] *= inv;
      } else {
        Store(yr, j * inner, expf(Load(xr, j * inner) - mx) * inv);
      }
    }
  }
}

// dX = Out * (dOut - sum(dOut * Out)).
template <typename T>
__global__ void SoftmaxGradRowKernel(const T* y, const T* dy, T* dx, int64_t rows, int64_t n) {
  __shared__ double sums[kBlock];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * n;
    double dot = 0.0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      dot += double{Load(dy, base + j)} * Load(y, base + j);
    }
    const float fdot = static_cast<float>(BlockSum(dot, sums));
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      Store(dx, base + j, Load(y, base + j) * (Load(dy, base + j) - fdot));
    }
  }
}

template <typename T>
__global__ void SoftmaxGradColumnKernel(const T* y, const T* dy, T* dx, int64_t outer, int64_t n,
                                        int64_t inner) {
  LOOM_GRID_STRIDE(c, outer * inner) {
    const int64_t o = c / inner, i = c - o * inner;
    const int64_t base = o * n * inner + i;
    double dot = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      dot += double{Load(dy, base + j * inner)} * Load(y, base + j * inner);
    }
    const float fdot = static_cast<float>(dot);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t k = base + j * inner;
      Store(dx, k, Load(y, k) * (Load(dy, k) - fdot));
    }
  }
}

// One block per row: log-sum-exp around the max, in double.
__global__ void CrossEntropyKernel(const float* logits, const int64_t* label, float* softmax,
                                   float* loss, int64_t rows, int64_t v, int64_t begin,
                                   int64_t classes, int64_t ignore) {
  __shared__ double sums[kBlock];
  __shared__ float maxes[kBlock];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const bool counted = label[r] != ignore;
    if (classes == 0) {  // no classes anywhere: only ignored rows get here
      if (threadIdx.x == 0) loss[r] = 0.0f;
      continue;
    }
    const float* xr = logits + r * v;
    float* sr = softmax + r * v;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < v; j += blockDim.x) mx = fmaxf(mx, xr[j]);
    mx = BlockMax(mx, maxes);
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < v; j += blockDim.x) sum += exp(double{xr[j]} - mx);
    const double lse = mx + log(BlockSum(sum, sums));
    for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
      sr[j] = static_cast<float>(exp(xr[j] - lse));
    }
    if (threadIdx.x == 0) {
      const int64_t local = label[r] - begin;
      const double target = counted && local >= 0 && local < v ? xr[local] : 0.0;
      loss[r] = counted ? static_cast<float>(lse - target) : 0.0f;
    }
  }
}

// dLogits = dLoss * (Softmax - onehot(Label - begin)), zero on ignored rows.
__global__ void CrossEntropyGradKernel(const float* softmax, const int64_t* label,
                                       const float* dloss, float* dlogits, int64_t rows, int64_t v,
                                       int64_t begin, int64_t ignore) {
  LOOM_GRID_STRIDE(e, rows * v) {
    const int64_t r = e / v, j = e - r * v;
    const int64_t l = label[r];
    if (l == ignore) {
      dlogits[e] = 0.0f;
      continue;
    }
    const float g = dloss[r];
    const float d = g * softmax[e];
    dlogits[e] = j == l - begin ? d - g : d;
  }
}

__global__ void ShardRowMaxKernel(const float* logits, float* mx, int64_t rows, int64_t v) {
  __shared__ float maxes[kBlock];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < v; j += blockDim.x) m = fmaxf(m, logits[r * v + j]);
    m = BlockMax(m, maxes);
    if (threadIdx.x == 0) mx[r] = m;
  }
}

__global__ void ShardRowSumsKernel(const float* logits, const int64_t* label, const float* mx,
                                   double* sum, double* target, int64_t rows, int64_t v,
                                   int64_t begin, int64_t ignore) {
  __shared__ double sums[kBlock];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = logits + r * v;
    double acc = 0.0;
    for (int64_t j = threadIdx.x; j < v; j += blockDim.x) acc += exp(double{xr[j]} - mx[r]);
    acc = BlockSum(acc, sums);
    if (threadIdx.x == 0) {
      const int64_t local = label[r] - begin;
      sum[r] = acc;
      target[r] = label[r] != ignore && local >= 0 && local < v ? xr[local] : 0.0;
    }
  }
}

__global__ void ShardFinishKernel(const float* logits, const int64_t* label, const float* mx,
                                  const double* sum, const double* target, float* softmax,
                                  float* loss, int64_t rows, int64_t v, int64_t classes,
                                  int64_t ignore) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    if (classes == 0) {  // no classes anywhere: only ignored rows
      if (threadIdx.x == 0) loss[r] = 0.0f;
      continue;
    }
    const double lse = mx[r] + log(sum[r]);
    for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
      softmax[r * v + j] = static_cast<float>(exp(logits[r * v + j] - lse));
    }
    if (threadIdx.x == 0) loss[r] = label[r] != ignore ? static_cast<float>(lse - target[r]) : 0.0f;
  }
}

}  // namespace

void LaunchSoftmax(FloatType t, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
                   bool causal, int64_t sq, cudaStream_t s) {
  if (outer * n * inner <= 0) return;
  WithStorageType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = static_cast<const T*>(x);
    T* py = static_cast<T*>(y);
    if (inner == 1) {
      SoftmaxRowKernel<<<GridFor(outer, 1), kBlock, 0, s>>>(px, py, outer, n, causal, sq);
    } else {
      SoftmaxColumnKernel<<<GridFor(outer * inner), kBlock, 0, s>>>(px, py, outer, n, inner);
    }
  });
}

void LaunchSoftmaxGrad(FloatType t, const void* y, const void* dy, void* dx, int64_t outer,
                       int64_t n, int64_t inner, cudaStream_t s) {
  if (outer * n * inner <= 0) return;
  WithStorageType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* py = static_cast<const T*>(y);
    const T* pdy = static_cast<const T*>(dy);
    T* pdx = static_cast<T*>(dx);
    if (inner == 1) {
      SoftmaxGradRowKernel<<<GridFor(outer, 1), kBlock, 0, s>>>(py, pdy, pdx, outer, n);
    } else {
      SoftmaxGradColumnKernel<<<GridFor(outer * inner), kBlock, 0, s>>>(py, pdy, pdx, outer, n,
                                                                          inner);
    }
  });
}

void LaunchCrossEntropy(const float* logits, const int64_t* label, float* softmax, float* loss,
                        int64_t rows, int64_t v, int64_t begin, int64_t classes, int64_t ignore,
                        cudaStream_t s) {
  if (rows <= 0) return;
  CrossEntropyKernel<<<GridFor(rows, 1), kBlock, 0, s>>>(logits, label, softmax, loss, rows, v,
                                                         begin, classes, ignore);
}

void LaunchCrossEntropyGrad(const float* softmax, const int64_t* label, const float* dloss,
                            float* dlogits, int64_t rows, int64_t v, int64_t begin, int64_t ignore,
                            cudaStream_t s) {
  if (rows * v <= 0) return;
  CrossEntropyGradKernel<<<GridFor(rows * v), kBlock, 0, s>>>(softmax, label, dloss, dlogits, rows,
                                                              v, begin, ignore);
}

void LaunchShardRowMax(const float* logits, float* mx, int64_t rows, int64_t v, cudaStream_t s) {
  if (rows > 0) ShardRowMaxKernel<<<GridFor(rows, 1), kBlock, 0, s>>>(logits, mx, rows, v);
}

void LaunchShardRowSums(const float* logits, const int64_t* label, const float* mx, double* sum,
                        double* target, int64_t rows, int64_t v, int64_t begin, int64_t ignore,
                        cudaStream_t s) {
  if (rows <= 0) return;
  ShardRowSumsKernel<<<GridFor(rows, 1), kBlock, 0, s>>>(logits, label, mx, sum, target, rows, v,
                                                         begin, ignore);
}

void LaunchShardFinish(const float* logits, const int64_t* label, const float* mx,
                       const double* sum, const double* target, float* softmax, float* loss,
                       int64_t rows, int64_t v, int64_t classes, int64_t ignore, cudaStream_t s) {
  if (rows <= 0) return;
  ShardFinishKernel<<<GridFor(rows, 1), kBlock, 0, s>>>(logits, label, mx, sum, target, softmax,
                                                        loss, rows, v, classes, ignore);
}

}  // namespace cuda
}  // namespace loom
