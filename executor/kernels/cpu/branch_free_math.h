// Transcendental functions for the CPU kernels' element loops, without
// branches or calls, so that the compiler vectorizes the loops and an op
// takes the same time whatever its data. glibc's tanhf takes a path per
// input range: gelu on one pipeline stage's activations ran 1.7x as long
// as on another's (same shape), which no cost table keyed by shape can
// price. Accuracy is stated per function and tested in math_ops_test.
// GCC vectorizes the loops that call these only where FP operations are
// known not to trap (-fno-trapping-math, set on the files that use them
// in executor/CMakeLists.txt); results are the same either way.
#ifndef LOOM_EXECUTOR_KERNELS_CPU_BRANCH_FREE_MATH_H_
#define LOOM_EXECUTOR_KERNELS_CPU_BRANCH_FREE_MATH_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace loom {
namespace branch_free {

// e^x for x in [-87, 0] (the caller's to ensure), relative error under
// 1 ulp. Cody-Waite reduction
// x = n ln2 + r with |r| <= ln2 / 2, a degree-7 Taylor polynomial for
// e^r, and 2^n written into the exponent bits.
inline float ExpNonPositive(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;  // ln 2's leading 16 bits
  constexpr float kLn2Lo = 1.42860682030941723e-6f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float rounded = (x * kLog2e + kRound) - kRound;
  // The exponent stays at or above float's smallest normal: below the
  // domain, and for a NaN (which the comparison sends here and r keeps),
  // the int conversion would otherwise be undefined.
  const float n = rounded > -126.0f ? rounded : -126.0f;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

// tanh(u) with absolute error under 2e-7 everywhere (what gelu reads:
// 1 + tanh and 1 - tanh^2). From e = e^(-2|u|): (1 - e) / (1 + e), with
// the sign put back; |u| past 9 gives +-1 as tanhf does.
inline float Tanh(float u) {
  const float a = std::min(std::fabs(u), 9.0f);
  const float e = ExpNonPositive(-2.0f * a);
  return std::copysign((1.0f - e) / (1.0f + e), u);
}

// erf(x) with absolute error under 2e-7 everywhere. Two least-squares
// polynomials fitted (in double, on Chebyshev nodes) for this file:
// erf(x) = x P(x^2) for |x| < 1, and erf(|x|) = 1 - e^(-x^2) Q(|x|) on
// [1, 3.92], past which erf rounds to +-1 in float. Both are computed and
// one is chosen, so that the loop has no branch.
inline float Erf(float x) {
  const float a = std::min(std::fabs(x), 3.92f);
  const float s = a * a;
  float p = 7.933493884e-05f;
  p = p * s - 8.034846649e-04f;
  p = p * s + 5.191218377e-03f;
  p = p * s - 2.685539945e-02f;
  p = p * s + 1.128362573e-01f;
  p = p * s - 3.761262988e-01f;
  p = p * s + 1.128379167e+00f;
  const float b = std::max(a, 1.0f);
  float q = 1.836043503e-06f;
  q = q * b - 5.213224610e-05f;
  q = q * b + 6.701590413e-04f;
  q = q * b - 5.170252822e-03f;
  q = q * b + 2.677813428e-02f;
  q = q * b - 9.879905080e-02f;
  q = q * b + 2.693569630e-01f;
  q = q * b - 5.563804719e-01f;
  q = q * b + 8.852495069e-01f;
  q = q * b - 1.087386558e+00f;
  q = q * b + 9.933154067e-01f;
  const float tail = 1.0f - ExpNonPositive(-b * b) * q;
  return std::copysign(a < 1.0f ? a * p : tail, x);
}

}  // namespace branch_free
}  // namespace loom

#endif  // LOOM_EXECUTOR_KERNELS_CPU_BRANCH_FREE_MATH_H_
