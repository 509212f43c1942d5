// The CPU kernels' branch-free transcendentals against double-precision
// libm, over every float step of their ranges that matters.
#include "executor/kernels/cpu/branch_free_math.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace loom {
namespace {

// The largest |f(x) - reference(x)| over x = lo, lo + step, ... < hi, and
// where it is.
template <typename F, typename R>
std::pair<double, float> LargestAbsError(F f, R reference, float lo, float hi, float step) {
  double worst = 0;
  float where = lo;
  for (float x = lo; x < hi; x += step) {
    const double e = std::fabs(static_cast<double>(f(x)) - reference(static_cast<double>(x)));
    if (e > worst) {
      worst = e;
      where = x;
    }
  }
  return {worst, where};
}

TEST(BranchFreeMath, ExpIsWithinAnUlp) {
  double worst = 0;
  for (float x = -87.0f; x <= 0.0f; x += 1e-3f) {
    const double ref = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(branch_free::ExpNonPositive(x) - ref) / ref);
  }
  EXPECT_LT(worst, std::ldexp(1.0, -23)) << "largest relative error";
  EXPECT_EQ(branch_free::ExpNonPositive(0.0f), 1.0f);
}

TEST(BranchFreeMath, TanhAbsoluteErrorUnder2e7) {
  auto [error, at] = LargestAbsError([](float u) { return branch_free::Tanh(u); },
                                     [](double u) { return std::tanh(u); }, -20.0f, 20.0f, 1e-4f);
  EXPECT_LT(error, 2e-7) << "at " << at;
  EXPECT_EQ(branch_free::Tanh(0.0f), 0.0f);
  EXPECT_EQ(branch_free::Tanh(50.0f), 1.0f);
  EXPECT_EQ(branch_free::Tanh(-50.0f), -1.0f);
  // Odd: the sign is put back exactly.
  EXPECT_EQ(branch_free::Tanh(-0.37f), -branch_free::Tanh(0.37f));
}

TEST(BranchFreeMath, ErfAbsoluteErrorUnder2e7) {
  // Both pieces and the seam at 1 and 3.92.
  auto [error, at] = LargestAbsError([](float x) { return branch_free::Erf(x); },
                                     [](double x) { return std::erf(x); }, -8.0f, 8.0f, 2e-5f);
  EXPECT_LT(error, 2e-7) << "at " << at;
  EXPECT_EQ(branch_free::Erf(0.0f), 0.0f);
  EXPECT_EQ(branch_free::Erf(10.0f), 1.0f);
  EXPECT_EQ(branch_free::Erf(-10.0f), -1.0f);
  EXPECT_EQ(branch_free::Erf(-0.8f), -branch_free::Erf(0.8f));
  // Near 0 erf(x) ~ 2x / sqrt(pi): relative accuracy holds there too.
  EXPECT_NEAR(branch_free::Erf(1e-4f) / 1.1283791671e-4, 1.0, 1e-6);
}

// A NaN goes through as a NaN (and, under UBSan, without an undefined
// float-to-int conversion on the way: a NaN or -inf exponent is clamped).
TEST(BranchFreeMath, NaNStaysNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(branch_free::ExpNonPositive(nan)));
  EXPECT_TRUE(std::isnan(branch_free::Tanh(nan)));
  EXPECT_TRUE(std::isnan(branch_free::Erf(nan)));
  EXPECT_EQ(branch_free::Tanh(std::numeric_limits<float>::infinity()), 1.0f);
  EXPECT_EQ(branch_free::Erf(-std::numeric_limits<float>::infinity()), -1.0f);
}

}  // namespace
}  // namespace loom
