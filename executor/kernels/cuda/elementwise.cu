// CUDA kernels for the elementwise ops, and the fixed-order reduction that
// their gradients and reduce_sum/reduce_mean share (kernels/cpu/
// elementwise.cc, reduce.cc). Templates over the storage type T
// (dtype_access.cuh): values and sums are float (or double), and a 16-bit
// output is rounded once, where the result is stored.
#include "executor/kernels/cuda/dtype_access.cuh"

namespace loom {
namespace cuda {
namespace {

#define LOOM_GRID_STRIDE(i, n)                                              \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); \
       i += int64_t{gridDim.x} * blockDim.x)

__device__ float Apply(BinaryOp op, float a, float b, float scale) {
  switch (op) {
    case kAdd:
      return a + b;
    case kSub:
      return a - b;
    case kMul:
      return a * b;
    default:
      return a * scale;
  }
}

template <typename T>
__global__ void SameShapeKernel(BinaryOp op, const T* x, const T* y, T* out, int64_t n,
                                float scale) {
  LOOM_GRID_STRIDE(i, n) {
    Store(out, i, Apply(op, Load(x, i), op == kScaleX ? 0.0f : Load(y, i), scale));
  }
}

template <typename T>
__global__ void BroadcastKernel(BinaryOp op, const T* x, const T* y, T* out, int64_t n,
                                BroadcastIndex index, float scale) {
  LOOM_GRID_STRIDE(i, n) {
    int64_t rest = i, a = 0, b = 0;
    for (int d = index.rank - 1; d >= 0; --d) {
      const int64_t c = rest % index.shape[d];
      rest /= index.shape[d];
      a += c * index.sx[d];
      b += c * index.sy[d];
    }
    Store(out, i, Apply(op, Load(x, a), op == kScaleX ? 0.0f : Load(y, b), scale));
  }
}

template <typename T>
__global__ void ScaleKernel(const T* x, T* out, int64_t n, float scale, float bias) {
  LOOM_GRID_STRIDE(i, n) { Store(out, i, scale * Load(x, i) + bias); }
}

// Inputs of type In; Out is In, or float for a running sum.
template <typename In, typename Out>
__global__ void SumKernel(SumInputs in, Out* out, int64_t n) {
  LOOM_GRID_STRIDE(i, n) {
    int k = 0;
    float acc = in.carry != nullptr ? in.carry[i] : Load(static_cast<const In*>(in.in[k++]), i);
    for (; k < in.count; ++k) acc += Load(static_cast<const In*>(in.in[k]), i);
    Store(out, i, acc);
  }
}

// Offsets into g and f of target t's first summand.
__device__ void TargetBase(const ReducePlan& p, int64_t t, int64_t* og, int64_t* of) {
  *og = 0;
  *of = 0;
  for (int d = p.kept_rank - 1; d >= 0; --d) {
    const int64_t c = t % p.kept_shape[d];
    t /= p.kept_shape[d];
    *og += c * p.kept_g[d];
    *of += c * p.kept_f[d];
  }
}

// One thread per target, walking its summands in row-major order with an
// odometer: the CPU's order exactly.
template <typename T, typename Acc>
__global__ void ReduceSerialKernel(ReducePlan p, const T* g, const T* f, T* out, double scale) {
  LOOM_GRID_STRIDE(t, p.kept_count) {
    int64_t og, of;
    TargetBase(p, t, &og, &of);
    int64_t idx[kMaxDims] = {0};
    Acc acc = 0;
    for (int64_t r = 0; r < p.red_count; ++r) {
      acc += f ? Acc(Load(g, og) * Load(f, of)) : Acc(Load(g, og));
      for (int d = p.red_rank - 1; d >= 0; --d) {
        og += p.red_g[d];
        of += p.red_f[d];
        if (++idx[d] < p.red_shape[d]) break;
        og -= p.red_g[d] * p.red_shape[d];
        of -= p.red_f[d] * p.red_shape[d];
        idx[d] = 0;
      }
    }
    Store(out, t, static_cast<float>(acc * static_cast<Acc>(scale)));
  }
}

// One block per target: strided partial sums, then a fixed tree. Same
// order on every run (the block size is fixed), for few, long targets.
template <typename T, typename Acc>
__global__ void ReduceTreeKernel(ReducePlan p, const T* g, const T* f, T* out, double scale) {
  __shared__ Acc part[kBlock];
  for (int64_t t = blockIdx.x; t < p.kept_count; t += gridDim.x) {
    int64_t og0, of0;
    TargetBase(p, t, &og0, &of0);
    Acc acc = 0;
    for (int64_t r = threadIdx.x; r < p.red_count; r += blockDim.x) {
      int64_t rest = r, og = og0, of = of0;
      for (int d = p.red_rank - 1; d >= 0; --d) {
        const int64_t c = rest % p.red_shape[d];
        rest /= p.red_shape[d];
        og += c * p.red_g[d];
        of += c * p.red_f[d];
      }
      acc += f ? Acc(Load(g, og) * Load(f, of)) : Acc(Load(g, og));
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int w = kBlock / 2; w > 0; w /= 2) {
      if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
      __syncthreads();
    }
    if (threadIdx.x == 0) Store(out, t, static_cast<float>(part[0] * static_cast<Acc>(scale)));
    __syncthreads();
  }
}

// Partial sums of chunk c of every target, the chunk walked in order:
// partial[c * kept_count + t].
template <typename T, typename Acc>
__global__ void ReducePartialKernel(ReducePlan p, const T* g, const T* f, Acc* partial,
                                    int64_t chunks) {
  LOOM_GRID_STRIDE(e, chunks * p.kept_count) {
    const int64_t c = e / p.kept_count, t = e - c * p.kept_count;
    int64_t og, of;
    TargetBase(p, t, &og, &of);
    // The chunk's first summand, then an odometer.
    const int64_t first = c * kReduceChunk;
    const int64_t end = min(p.red_count, first + kReduceChunk);
    int64_t idx[kMaxDims] = {0};
    int64_t rest = first;
    for (int d = p.red_rank - 1; d >= 0; --d) {
      idx[d] = rest % p.red_shape[d];
      rest /= p.red_shape[d];
      og += idx[d] * p.red_g[d];
      of += idx[d] * p.red_f[d];
    }
    Acc acc = 0;
    for (int64_t r = first; r < end; ++r) {
      acc += f ? Acc(Load(g, og) * Load(f, of)) : Acc(Load(g, og));
      for (int d = p.red_rank - 1; d >= 0; --d) {
        og += p.red_g[d];
        of += p.red_f[d];
        if (++idx[d] < p.red_shape[d]) break;
        og -= p.red_g[d] * p.red_shape[d];
        of -= p.red_f[d] * p.red_shape[d];
        idx[d] = 0;
      }
    }
    partial[e] = acc;
  }
}

template <typename T, typename Acc>
__global__ void ReduceChunksKernel(const Acc* partial, T* out, int64_t kept, int64_t chunks,
                                   double scale) {
  LOOM_GRID_STRIDE(t, kept) {
    Acc acc = 0;
    for (int64_t c = 0; c < chunks; ++c) acc += partial[c * kept + t];
    Store(out, t, static_cast<float>(acc * static_cast<Acc>(scale)));
  }
}

__global__ void FirstOutOfRangeKernel(const int64_t* v, int64_t n, int64_t lo, int64_t hi,
                                      bool has_skip, int64_t skip, unsigned long long* first) {
  LOOM_GRID_STRIDE(i, n) {
    const int64_t x = v[i];
    if ((!has_skip || x != skip) && (x < lo || x >= hi)) {
      atomicMin(first, static_cast<unsigned long long>(i));  // integer: order-free
    }
  }
}

__global__ void SetMaxKernel(unsigned long long* p) { *p = ~0ull; }

}  // namespace

void LaunchBinary(FloatType t, BinaryOp op, const void* x, const void* y, void* out, int64_t n,
                  const BroadcastIndex* index, float scale, cudaStream_t s) {
  if (n <= 0) return;
  WithStorageType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = static_cast<const T*>(x);
    const T* py = static_cast<const T*>(y);
    T* po = static_cast<T*>(out);
    if (index == nullptr) {
      SameShapeKernel<<<GridFor(n), kBlock, 0, s>>>(op, px, py, po, n, scale);
    } else {
      BroadcastKernel<<<GridFor(n), kBlock, 0, s>>>(op, px, py, po, n, *index, scale);
    }
  });
}

void LaunchScale(FloatType t, const void* x, void* out, int64_t n, float scale, float bias,
                 cudaStream_t s) {
  if (n <= 0) return;
  WithStorageType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    ScaleKernel<<<GridFor(n), kBlock, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(out), n,
                                              scale, bias);
  });
}

void LaunchSum(FloatType in_type, const SumInputs& inputs, FloatType out_type, void* out,
               int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  WithStorageType(in_type, [&](auto tag) {
    using In = typename decltype(tag)::type;
    if (out_type == kFp32) {
      SumKernel<In><<<GridFor(n), kBlock, 0, s>>>(inputs, static_cast<float*>(out), n);
    } else {
      SumKernel<In><<<GridFor(n), kBlock, 0, s>>>(inputs, static_cast<In*>(out), n);
    }
  });
}

ReduceMode ReduceModeOf(const ReducePlan& plan) {
  if (plan.red_count <= kReduceChunk) return ReduceMode::kSerial;
  if (plan.red_g[plan.red_rank - 1] == 1) return ReduceMode::kTree;
  return ReduceMode::kChunked;
}

int64_t ReduceScratchBytes(const ReducePlan& plan, bool in_double) {
  if (ReduceModeOf(plan) != ReduceMode::kChunked) return 0;
  const int64_t chunks = (plan.red_count + kReduceChunk - 1) / kReduceChunk;
  return chunks * plan.kept_count * (in_double ? sizeof(double) : sizeof(float));
}

template <typename T, typename Acc>
void Reduce(const ReducePlan& plan, const T* g, const T* f, T* out, double scale, void* scratch,
            cudaStream_t s) {
  switch (ReduceModeOf(plan)) {
    case ReduceMode::kSerial:
      ReduceSerialKernel<T, Acc>
          <<<GridFor(plan.kept_count), kBlock, 0, s>>>(plan, g, f, out, scale);
      return;
    case ReduceMode::kTree:
      ReduceTreeKernel<T, Acc>
          <<<GridFor(plan.kept_count, 1), kBlock, 0, s>>>(plan, g, f, out, scale);
      return;
    case ReduceMode::kChunked: {
      const int64_t chunks = (plan.red_count + kReduceChunk - 1) / kReduceChunk;
      Acc* partial = static_cast<Acc*>(scratch);
      ReducePartialKernel<T, Acc>
          <<<GridFor(chunks * plan.kept_count), kBlock, 0, s>>>(plan, g, f, partial, chunks);
      ReduceChunksKernel<T, Acc><<<GridFor(plan.kept_count), kBlock, 0, s>>>(
          partial, out, plan.kept_count, chunks, scale);
      return;
    }
  }
}

void LaunchReduce(FloatType t, const ReducePlan& plan, const void* g, const void* f, void* out,
                  double scale, bool in_double, void* scratch, cudaStream_t s) {
  if (plan.kept_count <= 0) return;
  WithStorageType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = static_cast<const T*>(g);
    const T* pf = static_cast<const T*>(f);
    T* po = static_cast<T*>(out);
    if (in_double) {
      Reduce<T, double>(plan, pg, pf, po, scale, scratch, s);
    } else {
      Reduce<T, float>(plan, pg, pf, po, scale, scratch, s);
    }
  });
}

void LaunchFirstOutOfRange(const int64_t* v, int64_t n, int64_t lo, int64_t hi, bool has_skip,
                           int64_t skip, unsigned long long* first, cudaStream_t s) {
  SetMaxKernel<<<1, 1, 0, s>>>(first);
  if (n > 0) {
    FirstOutOfRangeKernel<<<GridFor(n), kBlock, 0, s>>>(v, n, lo, hi, has_skip, skip, first);
  }
}

}  // namespace cuda
}  // namespace loom
