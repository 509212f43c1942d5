// CUDA kernels for lookup_table and lookup_table_grad. The lookup copies
// rows as bytes, so it serves every dtype; the gradient sums dOut (fp32,
// bf16 or fp16: dtype_access.cuh) in float into an fp32 dW.
#include "executor/kernels/cuda/dtype_access.cuh"

namespace loom {
namespace cuda {
namespace {

// The local row of an id, or -1 for padding and ids of other shards.
__device__ int64_t RowOf(int64_t id, int64_t start, int64_t vocab, int64_t padding) {
  if (id == padding) return -1;
  if (start == -1) return id;
  const int64_t r = id - start;
  return r >= 0 && r < vocab ? r : -1;
}

// Rows are copied in words of T (4-byte words where the row allows).
template <typename T>
__global__ void LookupKernel(const T* table, const int64_t* ids, T* out, int64_t n, int64_t words,
                             int64_t start, int64_t vocab, int64_t padding) {
  const int64_t total = n * words;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = e / words, w = e - i * words;
    const int64_t r = RowOf(ids[i], start, vocab, padding);
    out[e] = r < 0 ? T(0) : table[r * words + w];
  }
}

// One thread per column of dW, walking the ids in order: repeated ids sum
// in position order, as on the CPU, with no float atomics.
template <typename T>
__global__ void LookupGradKernel(const T* dout, const int64_t* ids, float* dw, int64_t n,
                                 int64_t h, int64_t start, int64_t vocab, int64_t padding) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < h;
       j += int64_t{gridDim.x} * blockDim.x) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = RowOf(ids[i], start, vocab, padding);
      if (r >= 0) dw[r * h + j] += Load(dout, i * h + j);
    }
  }
}

}  // namespace

void LaunchLookupTable(const void* table, const int64_t* ids, void* out, int64_t n,
                       int64_t row_bytes, int64_t start, int64_t vocab, int64_t padding,
                       cudaStream_t s) {
  if (n <= 0 || row_bytes <= 0) return;
  const bool aligned =
      (reinterpret_cast<uintptr_t>(table) | reinterpret_cast<uintptr_t>(out)) % 4 == 0;
  if (aligned && row_bytes % 4 == 0) {
    const int64_t words = row_bytes / 4;
    LookupKernel<uint32_t><<<GridFor(n * words), kBlock, 0, s>>>(
        static_cast<const uint32_t*>(table), ids, static_cast<uint32_t*>(out), n, words, start,
        vocab, padding);
  } else {
    LookupKernel<uint8_t><<<GridFor(n * row_bytes), kBlock, 0, s>>>(
        static_cast<const uint8_t*>(table), ids, static_cast<uint8_t*>(out), n, row_bytes, start,
        vocab, padding);
  }
}

void LaunchLookupTableGrad(FloatType t, const void* dout, const int64_t* ids, float* dw, int64_t n,
                           int64_t h, int64_t start, int64_t vocab, int64_t padding,
                           cudaStream_t s) {
  if (vocab * h > 0) cudaMemsetAsync(dw, 0, sizeof(float) * vocab * h, s);
  if (n <= 0 || h <= 0) return;
  WithStorageType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Small blocks: h is often only a few thousand columns.
    LookupGradKernel<<<GridFor(h, 64), 64, 0, s>>>(static_cast<const T*>(dout), ids, dw, n, h,
                                                   start, vocab, padding);
  });
}

}  // namespace cuda
}  // namespace loom
