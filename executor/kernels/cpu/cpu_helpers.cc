#include "executor/kernels/cpu/cpu_helpers.h"

#include <cstring>

namespace loom {

std::vector<int64_t> BroadcastStrides(const Shape& in, const Shape& out) {
  const size_t rank = out.size();
  std::vector<int64_t> strides(rank, 0);
  int64_t stride = 1;
  for (size_t k = 0; k < in.size(); ++k) {
    size_t d_in = in.size() - 1 - k;
    size_t d_out = rank - 1 - k;
    strides[d_out] = in[d_in] == 1 ? 0 : stride;
    stride *= in[d_in];
  }
  return strides;
}

void ReduceToShape(const float* grad, const Shape& out, const Shape& in,
                   float* result) {
  const int64_t n_in = NumElements(in);
  if (in == out) {
    std::memcpy(result, grad, sizeof(float) * n_in);
    return;
  }
  std::memset(result, 0, sizeof(float) * n_in);
  auto s_in = BroadcastStrides(in, out);
  std::vector<int64_t> zero(out.size(), 0);
  ForEachBroadcast(out, s_in, zero, [&](int64_t i, int64_t a, int64_t) {
    result[a] += grad[i];
  });
}

}  // namespace loom
