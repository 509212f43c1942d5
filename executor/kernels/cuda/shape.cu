// The strided copy behind transpose, slice, split, concat and their
// gradients (kernels/cuda/shape.cc): each destination element is read from
// its source by index, so one kernel serves every layout.
#include "executor/kernels/cuda/launchers.h"

namespace loom {
namespace cuda {
namespace {

template <typename T>
__global__ void StridedCopyKernel(const T* src, T* dst, CopyPlan p, int64_t n) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n;
       e += int64_t{gridDim.x} * blockDim.x) {
    int64_t rest = e, so = p.src_offset, dof = p.dst_offset;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int64_t c = rest % p.shape[d];
      rest /= p.shape[d];
      so += c * p.src_stride[d];
      dof += c * p.dst_stride[d];
    }
    dst[dof] = src[so];
  }
}

template <typename T>
void Launch(const void* src, void* dst, const CopyPlan& plan, int64_t n, cudaStream_t s) {
  StridedCopyKernel<T>
      <<<GridFor(n), kBlock, 0, s>>>(static_cast<const T*>(src), static_cast<T*>(dst), plan, n);
}

}  // namespace

void LaunchStridedCopy(const void* src, void* dst, const CopyPlan& plan, int elem_size,
                       cudaStream_t s) {
  int64_t n = 1;
  for (int d = 0; d < plan.rank; ++d) n *= plan.shape[d];
  if (n <= 0) return;
  switch (elem_size) {
    case 1:
      Launch<uint8_t>(src, dst, plan, n, s);
      break;
    case 2:
      Launch<uint16_t>(src, dst, plan, n, s);
      break;
    case 4:
      Launch<uint32_t>(src, dst, plan, n, s);
      break;
    case 8:
      Launch<uint64_t>(src, dst, plan, n, s);
      break;
    default:
      break;  // the host side rejects other sizes
  }
}

}  // namespace cuda
}  // namespace loom
