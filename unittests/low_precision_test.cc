// bf16 and fp16: the conversions against independent references (the
// formats' definitions, the nearest value found by search), the cast op
// and its gradient, and fp32-only kernels run on low-precision tensors
// (executor/fp32_shim.h), whose results must be the fp32 kernel's rounded
// once.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "framework/low_precision.h"
#include "framework/op_builder.h"
#include "framework/op_registry.h"
#include "unittests/grad_check.h"
#include "unittests/op_runner.h"

namespace loom {
namespace {

using testing::AppendStatus;
using testing::RandomTensor;
using testing::RunOp;

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Floats that stress rounding: random bit patterns over the whole range,
// values halfway between neighbours of both formats, and the edges.
std::vector<float> HardFloats() {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f,
                          std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                          std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::ldexp(1.0f, -24), std::ldexp(1.0f, -25), std::ldexp(3.0f, -26),
                          std::ldexp(1.0f, -14), std::ldexp(1023.5f, -24)};
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t u = rng();
    if ((u & 0x7fffffffu) > 0x7f800000u) continue;  // NaNs are checked apart
    v.push_back(FromBits(u));
  }
  // Exact ties: a bf16 value plus half its last place, and the same for fp16
  // in its normal and subnormal ranges.
  for (int i = 0; i < 5000; ++i) {
    const uint32_t hi = (rng() & 0x7f7fu) | ((rng() & 1u) << 15);
    v.push_back(FromBits((hi << 16) | 0x8000u));
    const float h = ToFloat(float16{static_cast<uint16_t>(rng() & 0x7bffu)});
    const float ulp = std::ldexp(1.0f, std::max(std::ilogb(h), -14) - 10);
    v.push_back(h + ulp / 2);
  }
  return v;
}

TEST(LowPrecision, Fp16RoundTripsEveryValue) {
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const float16 h{static_cast<uint16_t>(b)};
    const float f = ToFloat(h);
    if ((b & 0x7c00u) == 0x7c00u && (b & 0x3ffu) != 0) {
      EXPECT_TRUE(std::isnan(f)) << b;
      EXPECT_EQ(ToFloat16(f).bits & 0x7c00u, 0x7c00u) << b;
      EXPECT_NE(ToFloat16(f).bits & 0x3ffu, 0u) << b;
      continue;
    }
    ASSERT_EQ(ToFloat16(f).bits, b) << "fp16 " << b << " = " << f;
  }
}

// fp16 bits -> value by the format's definition, in double: independent
// of the bit tricks under test.
double Fp16ByDefinition(uint16_t b) {
  const int e = (b >> 10) & 0x1f;
  const int m = b & 0x3ff;
  const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1.0 + m / 1024.0, e - 15);
  return (b & 0x8000) ? -v : v;
}

TEST(LowPrecision, Fp16WidensAsTheFormatDefines) {
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    if ((b & 0x7c00u) == 0x7c00u) continue;  // infinities and NaNs: above
    ASSERT_EQ(double{ToFloat(float16{static_cast<uint16_t>(b)})},
              Fp16ByDefinition(static_cast<uint16_t>(b)))
        << b;
  }
}

TEST(LowPrecision, Fp16RoundsToTheNearestAndTiesToEven) {
  // The reference searches the sorted finite magnitudes for the two
  // neighbours and takes the nearer, the even one on a tie; at or past
  // 65520 (half-way to the next power of two) it rounds to infinity.
  std::vector<double> magnitudes(0x7c00);
  for (uint32_t b = 0; b < 0x7c00u; ++b) magnitudes[b] = Fp16ByDefinition(static_cast<uint16_t>(b));
  for (float f : HardFloats()) {
    const double a = std::fabs(double{f});
    const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    uint16_t want;
    if (a >= 65520.0) {
      want = sign | 0x7c00;
    } else {
      const size_t up = std::upper_bound(magnitudes.begin(), magnitudes.end(), a) -
                        magnitudes.begin();  // first magnitude above a
      const size_t down = up - 1;
      size_t pick = down;
      if (up < magnitudes.size()) {
        const double dd = a - magnitudes[down], du = magnitudes[up] - a;
        pick = dd < du ? down : du < dd ? up : ((down & 1) == 0 ? down : up);
      }
      want = sign | static_cast<uint16_t>(pick);
    }
    ASSERT_EQ(ToFloat16(f).bits, want) << "float " << f << " (bits " << Bits(f) << ")";
  }
}

TEST(LowPrecision, Bf16RoundsToTheNearestAndTiesToEven) {
  // The reference picks between the two bf16 neighbours by distance in
  // double, the even one on a tie: a different algorithm from the bit
  // trick under test.
  for (float f : HardFloats()) {
    const uint32_t u = Bits(f);
    uint16_t want;
    if (std::isinf(f)) {
      want = static_cast<uint16_t>(u >> 16);
    } else {
      const uint16_t down = static_cast<uint16_t>(u >> 16);
      const uint16_t up = static_cast<uint16_t>(down + 1);
      const double dd = std::fabs(double{f} - double{ToFloat(bfloat16{down})});
      // The neighbour past the largest finite value is infinity, which
      // IEEE rounding treats as 2^128 for distance.
      const double upper = (up & 0x7fffu) == 0x7f80u ? std::ldexp(1.0, 128) * (f < 0 ? -1 : 1)
                                                     : double{ToFloat(bfloat16{up})};
      const double du = std::fabs(double{f} - upper);
      want = dd < du ? down : du < dd ? up : ((down & 1u) == 0 ? down : up);
    }
    ASSERT_EQ(ToBfloat16(f).bits, want) << "float " << f << " (bits " << Bits(f) << ")";
    // Every bf16 value widens exactly and narrows back to itself.
    ASSERT_EQ(ToBfloat16(ToFloat(bfloat16{want})).bits, want);
  }
  EXPECT_TRUE(std::isnan(ToFloat(ToBfloat16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload sits only in the low 16 bits must not become inf.
  EXPECT_TRUE(std::isnan(ToFloat(ToBfloat16(FromBits(0x7f800001u)))));
}

proto::OpDesc Cast(DataType in, DataType out) {
  return OpDescBuilder("cast")
      .Input("X", "x")
      .Output("Out", "out")
      .Attr("in_dtype", static_cast<int32_t>(in))
      .Attr("out_dtype", static_cast<int32_t>(out))
      .Build();
}

TEST(CastOp, ConvertsBetweenEveryPairOfComputeDtypes) {
  const Tensor x32 = RandomTensor({64}, 3, -300.0f, 300.0f);
  const std::vector<float> values = x32.ToFloatVector();
  for (DataType from : {proto::FP32, proto::BF16, proto::FP16}) {
    for (DataType to : {proto::FP32, proto::BF16, proto::FP16}) {
      SCOPED_TRACE(std::string(DataTypeName(from)) + " -> " + DataTypeName(to));
      const Tensor x = MakeTensor(from, {64}, values);
      const Tensor out = RunOp(Cast(from, to), {{"x", x}}, {"out"}).at("out");
      ASSERT_EQ(out.dtype(), to);
      // What `to` holds of x's value, rounded once from the float.
      const Tensor want = MakeTensor(to, {64}, x.ToFloatVector());
      EXPECT_EQ(std::memcmp(out.raw_data(), want.raw_data(), want.bytes()), 0);
    }
  }
}

TEST(CastOp, GradientCastsBack) {
  RegisterAllOps();
  const proto::OpDesc fwd = Cast(proto::FP32, proto::BF16);
  const OpSchema* schema = OpRegistry::Global().Find("cast");
  ASSERT_NE(schema, nullptr);
  std::vector<proto::OpDesc> grads = schema->grad_maker()(fwd);
  ASSERT_EQ(grads.size(), 1u);
  // d(cast)/dX is the identity on values: the bf16 gradient, widened.
  const Tensor dout = MakeTensor(proto::BF16, {5}, {0.1f, -2.5f, 3.0e5f, 1e-3f, 7.0f});
  auto out = RunOp(grads[0], {{"out@GRAD", dout}}, {"x@GRAD"});
  const Tensor& dx = out.at("x@GRAD");
  EXPECT_EQ(dx.dtype(), proto::FP32);
  EXPECT_EQ(dx.ToFloatVector(), dout.ToFloatVector());
}

TEST(CastOp, RejectsAMismatchedInputAndNonFloatDtypes) {
  Status s = AppendStatus(Cast(proto::FP32, proto::BF16), {{"x", {proto::FP16, {3}}}});
  EXPECT_NE(s.message().find("X is fp16 but in_dtype is fp32"), std::string::npos) << s;
  s = AppendStatus(Cast(proto::FP32, proto::INT64), {{"x", {proto::FP32, {3}}}});
  EXPECT_NE(s.message().find("out_dtype 5 is not fp32"), std::string::npos) << s;
}

// An op run on low-precision inputs gives exactly the fp32 kernel's result
// on the same (widened) values, rounded once per output.
struct ShimCase {
  std::string name;
  proto::OpDesc op;
  std::map<std::string, Tensor> inputs;  // fp32; the low ones are given in `dtype`
  std::vector<std::string> low_inputs;
  std::vector<std::string> outputs;
};

void ExpectRoundedFp32Result(const ShimCase& c, DataType dtype) {
  SCOPED_TRACE(c.name + " in " + DataTypeName(dtype));
  std::map<std::string, Tensor> low = c.inputs, wide = c.inputs;
  for (const std::string& name : c.low_inputs) {
    low[name] = MakeTensor(dtype, c.inputs.at(name).shape(), c.inputs.at(name).ToFloatVector());
    wide[name] = MakeTensor(low[name].shape(), low[name].ToFloatVector());
  }
  const auto got = RunOp(c.op, low, c.outputs);
  const auto ref = RunOp(c.op, wide, c.outputs);
  for (const std::string& name : c.outputs) {
    const Tensor& g = got.at(name);
    const Tensor& r = ref.at(name);
    ASSERT_EQ(g.shape(), r.shape()) << name;
    const Tensor want = MakeTensor(g.dtype(), r.shape(), r.ToFloatVector());
    EXPECT_EQ(std::memcmp(g.raw_data(), want.raw_data(), want.bytes()), 0)
        << name << " (" << DataTypeName(g.dtype()) << ") is not the fp32 result rounded";
  }
}

std::vector<ShimCase> ShimCases() {
  std::vector<ShimCase> cases;
  cases.push_back({"matmul",
                   OpDescBuilder("matmul").Input("X", "x").Input("Y", "y").Output("Out", "out"),
                   {{"x", RandomTensor({2, 3, 16}, 1)}, {"y", RandomTensor({16, 8}, 2)}},
                   {"x", "y"},
                   {"out"}});
  cases.push_back({"matmul_grad",
                   OpDescBuilder("matmul_grad")
                       .Input("X", "x")
                       .Input("Y", "y")
                       .Input("Out@GRAD", "dout")
                       .Output("X@GRAD", "dx")
                       .Output("Y@GRAD", "dy")
                       .Attr("transpose_y", true),
                   {{"x", RandomTensor({4, 16}, 3)},
                    {"y", RandomTensor({8, 16}, 4)},
                    {"dout", RandomTensor({4, 8}, 5)}},
                   {"x", "y", "dout"},
                   {"dx", "dy"}});
  cases.push_back({"gelu", OpDescBuilder("gelu").Input("X", "x").Output("Out", "out"),
                   {{"x", RandomTensor({3, 40}, 6, -4.0f, 4.0f)}},
                   {"x"},
                   {"out"}});
  cases.push_back({"causal softmax",
                   OpDescBuilder("softmax")
                       .Input("X", "x")
                       .Output("Out", "out")
                       .Attr("causal", true),
                   {{"x", RandomTensor({2, 6, 6}, 7, -3.0f, 3.0f)}},
                   {"x"},
                   {"out"}});
  // Layer norm's affine parameters and statistics stay fp32 (AMP keeps them
  // so): a shimmed op with inputs and outputs of both precisions.
  cases.push_back({"layer_norm",
                   OpDescBuilder("layer_norm")
                       .Input("X", "x")
                       .Input("Scale", "scale")
                       .Input("Bias", "bias")
                       .Output("Y", "y")
                       .Output("Mean", "mean")
                       .Output("Variance", "var"),
                   {{"x", RandomTensor({4, 32}, 8, -2.0f, 2.0f)},
                    {"scale", RandomTensor({32}, 9, 0.5f, 1.5f)},
                    {"bias", RandomTensor({32}, 10)}},
                   {"x"},
                   {"y", "mean", "var"}});
  cases.push_back({"elementwise_add, broadcast",
                   OpDescBuilder("elementwise_add").Input("X", "x").Input("Y", "y").Output("Out",
                                                                                           "out"),
                   {{"x", RandomTensor({3, 4, 5}, 11)}, {"y", RandomTensor({5}, 12)}},
                   {"x", "y"},
                   {"out"}});
  // add_grad reads X and Y for their shapes only (no copy is made of them).
  cases.push_back({"elementwise_add_grad",
                   OpDescBuilder("elementwise_add_grad")
                       .Input("X", "x")
                       .Input("Y", "y")
                       .Input("Out@GRAD", "dout")
                       .Output("X@GRAD", "dx")
                       .Output("Y@GRAD", "dy"),
                   {{"x", RandomTensor({3, 4, 5}, 13)},
                    {"y", RandomTensor({5}, 14)},
                    {"dout", RandomTensor({3, 4, 5}, 15)}},
                   {"x", "y", "dout"},
                   {"dx", "dy"}});
  return cases;
}

TEST(Fp32Shim, LowPrecisionOpsGiveTheFp32ResultRoundedOnce) {
  for (const ShimCase& c : ShimCases()) {
    ExpectRoundedFp32Result(c, proto::BF16);
    ExpectRoundedFp32Result(c, proto::FP16);
  }
}

TEST(Fp32Shim, AnOpUpdatingInPlaceReadsAndWritesOneCopy) {
  // scale with X and Out the same bf16 var: the kernel must see the input's
  // value and its result must land in the var.
  const proto::OpDesc op =
      OpDescBuilder("scale").Input("X", "x").Output("Out", "x").Attr("scale", 3.0f);
  const Tensor x = MakeTensor(proto::BF16, {4}, {1.0f, -0.5f, 2.0f, 1.0f / 3});
  const Tensor out = RunOp(op, {{"x", x}}, {"x"}).at("x");
  std::vector<float> want;
  for (float v : x.ToFloatVector()) want.push_back(ToFloat(ToBfloat16(3.0f * v)));
  EXPECT_EQ(out.ToFloatVector(), want);
}

}  // namespace
}  // namespace loom
