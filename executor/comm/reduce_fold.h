// How a member's part of a reduction is accumulated: element by element,
// in the dtype itself, or in float for bf16 and fp16 (widened on arrival,
// rounded once at the end, as a GPU reduction of them does).
#ifndef LOOM_EXECUTOR_COMM_REDUCE_FOLD_H_
#define LOOM_EXECUTOR_COMM_REDUCE_FOLD_H_

#include <cstdint>

#include "executor/comm/communicator.h"
#include "framework/low_precision.h"

namespace loom {

// What a member's part is summed in: the dtype itself, but float for bf16
// and fp16, which are widened on arrival and rounded once at the end (a
// GPU reduction of them accumulates in fp32 too).
template <typename T>
struct Accumulation {
  using Acc = T;
  static Acc Load(T v) { return v; }
  static T Store(Acc v) { return v; }
};
template <>
struct Accumulation<bfloat16> {
  using Acc = float;
  static Acc Load(bfloat16 v) { return ToFloat(v); }
  static bfloat16 Store(Acc v) { return ToBfloat16(v); }
};
template <>
struct Accumulation<float16> {
  using Acc = float;
  static Acc Load(float16 v) { return ToFloat(v); }
  static float16 Store(Acc v) { return ToFloat16(v); }
};

// acc = acc op x, element by element. Max propagates NaN.
template <typename T, typename Acc = typename Accumulation<T>::Acc>
void Fold(ReduceOp op, const T* x, Acc* acc, int64_t n) {
  using A = Accumulation<T>;
  if (op == ReduceOp::kMax) {
    for (int64_t i = 0; i < n; ++i) {
      const Acc v = A::Load(x[i]);
      acc[i] = (v > acc[i] || v != v) ? v : acc[i];
    }
  } else {
    for (int64_t i = 0; i < n; ++i) acc[i] = acc[i] + A::Load(x[i]);
  }
}

}  // namespace loom

#endif  // LOOM_EXECUTOR_COMM_REDUCE_FOLD_H_
