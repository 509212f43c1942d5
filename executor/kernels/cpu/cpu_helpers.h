// Helpers shared by the CPU kernels.
#ifndef LOOM_EXECUTOR_KERNELS_CPU_CPU_HELPERS_H_
#define LOOM_EXECUTOR_KERNELS_CPU_CPU_HELPERS_H_

#include <vector>

#include "executor/kernel.h"

namespace loom {

// Element strides of `in` as seen from a broadcast output of shape `out`:
// zero along dimensions where `in` is stretched. `in` aligns at the last dim.
std::vector<int64_t> BroadcastStrides(const Shape& in, const Shape& out);

// Calls fn(out_index, offset_a, offset_b) for every element of `out`, in
// row-major order, with the offsets of the matching elements of two inputs
// broadcast to it.
template <typename Fn>
void ForEachBroadcast(const Shape& out, const std::vector<int64_t>& sa,
                      const std::vector<int64_t>& sb, Fn fn) {
  const int rank = static_cast<int>(out.size());
  const int64_t n = NumElements(out);
  if (rank == 0) {
    if (n == 1) fn(0, 0, 0);
    return;
  }
  std::vector<int64_t> idx(rank, 0);
  int64_t oa = 0, ob = 0;
  const int64_t inner = out[rank - 1];
  const int64_t ia = sa[rank - 1], ib = sb[rank - 1];
  for (int64_t i = 0; i < n; i += inner) {
    for (int64_t j = 0; j < inner; ++j) fn(i + j, oa + j * ia, ob + j * ib);
    // Advance the odometer over the outer dims.
    for (int d = rank - 2; d >= 0; --d) {
      ++idx[d];
      oa += sa[d];
      ob += sb[d];
      if (idx[d] < out[d]) break;
      oa -= sa[d] * out[d];
      ob -= sb[d] * out[d];
      idx[d] = 0;
    }
  }
}

// Sums `grad` (shape `out`) over the dims along which `in` was broadcast,
// writing a tensor of shape `in`. Accumulation order is fixed (row-major).
void ReduceToShape(const float* grad, const Shape& out, const Shape& in,
                   float* result);

}  // namespace loom

#endif  // LOOM_EXECUTOR_KERNELS_CPU_CPU_HELPERS_H_
