// bfloat16 and float16 as stored values, and their conversions to and from
// float. Arithmetic is never done in them: kernels load into float, compute
// in float and round once on the store, as a GPU kernel with fp32
// accumulation does. Rounding is to nearest, ties to even; NaN stays NaN
// and an fp16 overflow becomes infinity.
#ifndef LOOM_FRAMEWORK_LOW_PRECISION_H_
#define LOOM_FRAMEWORK_LOW_PRECISION_H_

#include <cstdint>
#include <cstring>

#include "framework/types.h"

namespace loom {

struct bfloat16 {
  uint16_t bits;
};
struct float16 {
  uint16_t bits;
};

namespace low_precision_internal {
inline uint32_t BitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
inline float FloatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}
}  // namespace low_precision_internal

inline float ToFloat(bfloat16 v) {
  return low_precision_internal::FloatOf(uint32_t{v.bits} << 16);
}

inline bfloat16 ToBfloat16(float f) {
  uint32_t u = low_precision_internal::BitsOf(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    // NaN: keep it a NaN (a payload only in the low bits would round away).
    return bfloat16{static_cast<uint16_t>((u >> 16) | 0x40u)};
  }
  u += 0x7fffu + ((u >> 16) & 1u);
  return bfloat16{static_cast<uint16_t>(u >> 16)};
}

inline float ToFloat(float16 v) {
  using low_precision_internal::BitsOf;
  using low_precision_internal::FloatOf;
  const uint32_t sign = uint32_t{v.bits & 0x8000u} << 16;
  const uint32_t em = v.bits & 0x7fffu;
  if (em >= 0x7c00u) return FloatOf(sign | 0x7f800000u | ((em & 0x3ffu) << 13));
  // Normal: rebias the exponent from 15 to 127.
  if (em >= 0x400u) return FloatOf(sign | ((em << 13) + 0x38000000u));
  // Zero or subnormal: em units of 2^-24, exact in float.
  return FloatOf(sign | BitsOf(static_cast<float>(em) * 5.9604644775390625e-08f));
}

inline float16 ToFloat16(float f) {
  using low_precision_internal::BitsOf;
  using low_precision_internal::FloatOf;
  const uint32_t u = BitsOf(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return float16{static_cast<uint16_t>(sign | 0x7e00u)};  // NaN
  // 65520 lies halfway between 65504 (the largest finite) and 65536: ties
  // go to the even one, which is infinity.
  if (a >= 0x477ff000u) return float16{static_cast<uint16_t>(sign | 0x7c00u)};
  if (a < 0x38800000u) {
    // Below 2^-14: subnormal. Adding 0.5 makes float's own rounding cut at
    // 2^-24, fp16's subnormal step; 2^-14 itself comes out as the smallest
    // normal's encoding.
    const uint32_t units = BitsOf(FloatOf(a) + 0.5f) - BitsOf(0.5f);
    return float16{static_cast<uint16_t>(sign | units)};
  }
  // Normal: rebias the exponent (-112) and round at bit 13, ties to even.
  a += 0xc8000fffu + ((a >> 13) & 1u);
  return float16{static_cast<uint16_t>(sign | (a >> 13))};
}

// Whether kernels store `dtype` in 16 bits and compute on it in fp32.
inline bool IsLowPrecision(DataType dtype) {
  return dtype == proto::BF16 || dtype == proto::FP16;
}

// `n` values of `dtype` (FP32, BF16 or FP16) at `src` into floats at `dst`,
// and back with rounding. Same-dtype calls copy.
void WidenToFloat(DataType dtype, const void* src, int64_t n, float* dst);
void NarrowFromFloat(DataType dtype, const float* src, int64_t n, void* dst);

}  // namespace loom

#endif  // LOOM_FRAMEWORK_LOW_PRECISION_H_
