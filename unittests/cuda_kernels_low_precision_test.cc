// The CUDA kernels on bf16 and fp16 (executor/kernels/cuda/, dtype_access
// .cuh): a case of every kernel family in both dtypes, with its backward,
// runs on the CPU here through the executors' Fp32Shim (fp32 kernels on
// widened copies, every low-precision output rounded once), and, where
// there is a device, on the CUDA kernels too, which must give the CPU's
// result: the same bits where the kernel makes each element with the
// CPU's float operations in its order, else within the fp32 cases' bound
// plus one ulp of the dtype (cuBLAS, tree reductions and transcendentals
// make slightly different floats, which may round to neighbours). Layer
// norm keeps its affine parameters and statistics fp32, as AMP does.
// Without a device the device tests skip, saying so.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "executor/kernel.h"

#ifdef LOOM_WITH_CUDA
#include "framework/low_precision.h"
#include "framework/op_builder.h"
#include "framework/program.h"
#include "unittests/cuda_kernel_harness.h"
#include "unittests/grad_check.h"
#endif

namespace loom {
namespace {

#ifndef LOOM_WITH_CUDA
TEST(CudaKernelsLowPrecision, NotBuilt) {
  GTEST_SKIP() << "built without the CUDA backend: no CUDA kernels to test";
}
#else

using testing::Case;
using testing::CudaKernelsOnDevice;
using testing::Ids;
using testing::MakeCase;

// Uniform values in [lo, hi) rounded to `dtype`.
Tensor Random(DataType dtype, const Shape& shape, uint64_t seed, float lo = -1.0f,
              float hi = 1.0f) {
  return MakeTensor(dtype, shape, testing::RandomTensor(shape, seed, lo, hi).ToFloatVector());
}

std::string Named(DataType dtype, const std::string& name) {
  return std::string(DataTypeName(dtype)) + " " + name;
}

std::vector<Case> MatmulCases(DataType dt) {
  std::vector<Case> cases;
  for (bool tx : {false, true}) {
    for (bool ty : {false, true}) {
      const std::string how = std::string(tx ? "T" : "N") + (ty ? "T" : "N");
      const Shape x = tx ? Shape{2, 3, 9, 4} : Shape{2, 3, 4, 9};
      const Shape y_b = ty ? Shape{2, 3, 6, 9} : Shape{2, 3, 9, 6};
      const Shape y_s = ty ? Shape{6, 9} : Shape{9, 6};
      auto op = [&](float alpha) {
        return OpDescBuilder("matmul")
            .Input("X", "x")
            .Input("Y", "y")
            .Output("Out", "out")
            .Attr("transpose_x", tx)
            .Attr("transpose_y", ty)
            .Attr("alpha", alpha)
            .Build();
      };
      cases.push_back(MakeCase(Named(dt, "matmul batched " + how), op(0.5f),
                               {{"x", Random(dt, x, 1)}, {"y", Random(dt, y_b, 2)}}, {"out"}));
      cases.push_back(MakeCase(Named(dt, "matmul shared Y " + how), op(1.0f),
                               {{"x", Random(dt, x, 3)}, {"y", Random(dt, y_s, 4)}}, {"out"}));
    }
  }
  // A long k: sums of 192 products, where orders differ most.
  cases.push_back(
      MakeCase(Named(dt, "matmul k 192"),
               OpDescBuilder("matmul").Input("X", "x").Input("Y", "y").Output("Out", "out"),
               {{"x", Random(dt, {24, 192}, 5)}, {"y", Random(dt, {192, 40}, 6)}}, {"out"}));
  return cases;
}

std::vector<Case> ElementwiseCases(DataType dt) {
  std::vector<Case> cases;
  for (const char* type : {"elementwise_add", "elementwise_sub", "elementwise_mul"}) {
    const proto::OpDesc op =
        OpDescBuilder(type).Input("X", "x").Input("Y", "y").Output("Out", "out");
    cases.push_back(MakeCase(Named(dt, std::string(type) + " row"), op,
                             {{"x", Random(dt, {4, 3, 5}, 1)}, {"y", Random(dt, {5}, 2)}},
                             {"out"}));
    cases.push_back(MakeCase(Named(dt, std::string(type) + " both"), op,
                             {{"x", Random(dt, {4, 1, 5}, 1)}, {"y", Random(dt, {3, 1}, 2)}},
                             {"out"}));
    // dY sums 300 rows: the chunked reduction.
    cases.push_back(MakeCase(Named(dt, std::string(type) + " bias"), op,
                             {{"x", Random(dt, {300, 40}, 1)}, {"y", Random(dt, {40}, 2)}},
                             {"out"}));
  }
  cases.push_back(MakeCase(Named(dt, "scale"),
                           OpDescBuilder("scale")
                               .Input("X", "x")
                               .Output("Out", "out")
                               .Attr("scale", 1.5f)
                               .Attr("bias", -0.25f),
                           {{"x", Random(dt, {7, 9}, 1)}}, {"out"}));
  // Eleven inputs: a running sum in fp32 scratch, rounded once at the end.
  std::map<std::string, Tensor> many;
  std::vector<std::string> names;
  for (int i = 0; i < 11; ++i) {
    names.push_back("x" + std::to_string(i));
    many[names.back()] = Random(dt, {6, 5}, 10 + i);
  }
  cases.push_back(MakeCase(Named(dt, "sum of 11"),
                           OpDescBuilder("sum").Input("X", names).Output("Out", "out"), many,
                           {"out"}));
  for (const char* type : {"reduce_sum", "reduce_mean"}) {
    cases.push_back(MakeCase(Named(dt, std::string(type) + " dim 1"),
                             OpDescBuilder(type)
                                 .Input("X", "x")
                                 .Output("Out", "out")
                                 .Attr("dims", std::vector<int32_t>{1}),
                             {{"x", Random(dt, {4, 70, 3}, 1)}}, {"out"}));
    cases.push_back(
        MakeCase(Named(dt, std::string(type) + " all"),
                 OpDescBuilder(type).Input("X", "x").Output("Out", "out").Attr("reduce_all", true),
                 {{"x", Random(dt, {50, 33}, 2)}}, {"out"}));
  }
  return cases;
}

std::vector<Case> NormAndSoftmaxCases(DataType dt) {
  std::vector<Case> cases;
  for (bool approximate : {false, true}) {
    cases.push_back(MakeCase(
        Named(dt, approximate ? "gelu tanh" : "gelu"),
        OpDescBuilder("gelu").Input("X", "x").Output("Out", "out").Attr("approximate", approximate),
        {{"x", Random(dt, {8, 33}, 1, -3.0f, 3.0f)}}, {"out"}));
  }
  const Tensor away = testing::RandomTensorAwayFromZero({8, 33}, 2, 0.01f);
  cases.push_back(MakeCase(Named(dt, "relu"),
                           OpDescBuilder("relu").Input("X", "x").Output("Out", "out"),
                           {{"x", MakeTensor(dt, away.shape(), away.ToFloatVector())}}, {"out"}));
  // X and Y in the low dtype; Scale, Bias, Mean, Variance and their
  // gradients fp32.
  for (int32_t axis : {1, 2}) {
    const int64_t h = axis == 1 ? 4 * 300 : 300;
    cases.push_back(MakeCase(Named(dt, "layer_norm axis " + std::to_string(axis)),
                             OpDescBuilder("layer_norm")
                                 .Input("X", "x")
                                 .Input("Scale", "scale")
                                 .Input("Bias", "bias")
                                 .Output("Y", "y")
                                 .Output("Mean", "mean")
                                 .Output("Variance", "var")
                                 .Attr("begin_norm_axis", axis),
                             {{"x", Random(dt, {6, 4, 300}, 1)},
                              {"scale", testing::RandomTensor({h}, 2)},
                              {"bias", testing::RandomTensor({h}, 3)}},
                             {"y"}));
  }
  cases.push_back(MakeCase(Named(dt, "layer_norm no affine"),
                           OpDescBuilder("layer_norm")
                               .Input("X", "x")
                               .Output("Y", "y")
                               .Output("Mean", "mean")
                               .Output("Variance", "var"),
                           {{"x", Random(dt, {70, 16}, 1)}}, {"y"}));
  cases.push_back(MakeCase(Named(dt, "softmax last"),
                           OpDescBuilder("softmax").Input("X", "x").Output("Out", "out"),
                           {{"x", Random(dt, {5, 600}, 1, -4.0f, 4.0f)}}, {"out"}));
  cases.push_back(MakeCase(
      Named(dt, "softmax inner"),
      OpDescBuilder("softmax").Input("X", "x").Output("Out", "out").Attr("axis", int32_t{1}),
      {{"x", Random(dt, {3, 7, 5}, 2)}}, {"out"}));
  cases.push_back(
      MakeCase(Named(dt, "softmax causal"),
               OpDescBuilder("softmax").Input("X", "x").Output("Out", "out").Attr("causal", true),
               {{"x", Random(dt, {2, 3, 5, 7}, 3)}}, {"out"}));
  return cases;
}

std::vector<Case> OtherCases(DataType dt) {
  std::vector<Case> cases;
  cases.push_back(MakeCase(Named(dt, "lookup_table"),
                           OpDescBuilder("lookup_table")
                               .Input("W", "w")
                               .Input("Ids", "ids")
                               .Output("Out", "out")
                               .Attr("padding_idx", int64_t{2}),
                           {{"w", Random(dt, {20, 8}, 1)},
                            {"ids", Ids({3, 4}, {1, 2, 3, 19, 3, 3, 0, 5, 2, 7, 3, 1})}},
                           {"out"}));
  cases.push_back(
      MakeCase(Named(dt, "lookup_table shard"),
               OpDescBuilder("lookup_table")
                   .Input("W", "w")
                   .Input("Ids", "ids")
                   .Output("Out", "out")
                   .Attr("start_index", int64_t{10}),
               {{"w", Random(dt, {10, 6}, 2)}, {"ids", Ids({5}, {0, 12, 19, 12, 25})}}, {"out"}));
  for (int64_t step : {0, 7}) {
    Case c = MakeCase(Named(dt, "dropout"),
                      OpDescBuilder("dropout")
                          .Input("X", "x")
                          .Output("Out", "out")
                          .Output("Mask", "mask")
                          .Attr("dropout_prob", 0.3f)
                          .Attr("seed", int64_t{42}),
                      {{"x", Random(dt, {6, 5, 9}, 1)}}, {"out"});
    c.run = RunInfo{step, 3};
    cases.push_back(std::move(c));
  }
  cases.push_back(MakeCase(Named(dt, "dropout shard"),
                           OpDescBuilder("dropout")
                               .Input("X", "x")
                               .Output("Out", "out")
                               .Output("Mask", "mask")
                               .Attr("dropout_prob", 0.5f)
                               .Attr("seed", int64_t{9})
                               .Attr("full_shape", std::vector<int64_t>{8, 12})
                               .Attr("shard_offsets", std::vector<int64_t>{2, 4}),
                           {{"x", Random(dt, {3, 4, 6}, 2)}}, {"out"}));
  cases.push_back(MakeCase(Named(dt, "dropout is_test"),
                           OpDescBuilder("dropout")
                               .Input("X", "x")
                               .Output("Out", "out")
                               .Output("Mask", "mask")
                               .Attr("is_test", true),
                           {{"x", Random(dt, {4, 4}, 3)}}));
  // Shapes and copies: bytes moved at two bytes an element.
  const Tensor x = Random(dt, {4, 6, 5}, 1);
  cases.push_back(MakeCase(Named(dt, "transpose"),
                           OpDescBuilder("transpose")
                               .Input("X", "x")
                               .Output("Out", "out")
                               .Attr("perm", std::vector<int32_t>{2, 0, 1}),
                           {{"x", x}}, {"out"}));
  cases.push_back(MakeCase(Named(dt, "reshape"),
                           OpDescBuilder("reshape")
                               .Input("X", "x")
                               .Output("Out", "out")
                               .Attr("shape", std::vector<int64_t>{24, 5}),
                           {{"x", x}}, {"out"}));
  cases.push_back(MakeCase(Named(dt, "slice"),
                           OpDescBuilder("slice")
                               .Input("X", "x")
                               .Output("Out", "out")
                               .Attr("axes", std::vector<int32_t>{1, 2})
                               .Attr("starts", std::vector<int64_t>{1, -3})
                               .Attr("ends", std::vector<int64_t>{5, 5}),
                           {{"x", x}}, {"out"}));
  cases.push_back(MakeCase(Named(dt, "split"),
                           OpDescBuilder("split")
                               .Input("X", "x")
                               .Output("Out", std::vector<std::string>{"a", "b", "c"})
                               .Attr("axis", int32_t{1})
                               .Attr("sections", std::vector<int64_t>{1, -1, 2}),
                           {{"x", x}}, {"a", "c"}));
  cases.push_back(MakeCase(Named(dt, "concat"),
                           OpDescBuilder("concat")
                               .Input("X", std::vector<std::string>{"x", "y"})
                               .Output("Out", "out")
                               .Attr("axis", int32_t{2}),
                           {{"x", x}, {"y", Random(dt, {4, 6, 2}, 2)}}, {"out"}));
  cases.push_back(MakeCase(Named(dt, "flat_concat"),
                           OpDescBuilder("flat_concat")
                               .Input("X", std::vector<std::string>{"x", "y"})
                               .Output("Out", "out"),
                           {{"x", x}, {"y", Random(dt, {7}, 2)}}));
  cases.push_back(MakeCase(Named(dt, "flat_split"),
                           OpDescBuilder("flat_split")
                               .Input("X", "x")
                               .Output("Out", std::vector<std::string>{"a", "b"})
                               .Attr("offsets", std::vector<int64_t>{0, 6})
                               .Attr("dims", std::vector<int64_t>{2, 3, 6})
                               .Attr("ranks", std::vector<int32_t>{2, 1}),
                           {{"x", Random(dt, {12}, 3)}}));
  cases.push_back(MakeCase(Named(dt, "identity"),
                           OpDescBuilder("identity").Input("X", "x").Output("Out", "out"),
                           {{"x", x}}));
  // Fills: 0.1 is not a bf16 or fp16 value, so it is rounded.
  for (float value : {2.5f, 0.1f}) {
    cases.push_back(MakeCase(Named(dt, "fill_constant " + std::to_string(value)),
                             OpDescBuilder("fill_constant")
                                 .Output("Out", "out")
                                 .Attr("shape", std::vector<int64_t>{3, 5})
                                 .Attr("value", value)
                                 .Attr("dtype", static_cast<int32_t>(dt)),
                             {}));
  }
  cases.push_back(MakeCase(Named(dt, "gaussian_random"),
                           OpDescBuilder("gaussian_random")
                               .Output("Out", "out")
                               .Attr("shape", std::vector<int64_t>{9, 4})
                               .Attr("seed", int64_t{5})
                               .Attr("dtype", static_cast<int32_t>(dt)),
                           {}));
  cases.push_back(MakeCase(Named(dt, "uniform_random"),
                           OpDescBuilder("uniform_random")
                               .Output("Out", "out")
                               .Attr("shape", std::vector<int64_t>{9, 4})
                               .Attr("seed", int64_t{6})
                               .Attr("dtype", static_cast<int32_t>(dt)),
                           {}));
  return cases;
}

std::vector<Case> AllCases(DataType dt) {
  std::vector<Case> all;
  for (auto* cases : {MatmulCases, ElementwiseCases, NormAndSoftmaxCases, OtherCases}) {
    for (Case& c : cases(dt)) all.push_back(std::move(c));
  }
  return all;
}

// Every case runs on the CPU, and the cases run every op whose CUDA kernel
// is native (cast has its own cases, in cuda_kernels_test.cc): a device
// then compares each of them in both dtypes.
TEST(CudaKernelsLowPrecision, CasesRunOnTheCpuAndCoverEveryNativeKernel) {
  for (DataType dt : {proto::BF16, proto::FP16}) {
    SCOPED_TRACE(DataTypeName(dt));
    std::set<std::string> covered;
    const std::vector<Case> cases = AllCases(dt);
    testing::ExpectCasesRunOnTheCpu(cases, &covered);
    std::string uncovered;
    for (const std::string& type : KernelRegistry::Cuda().Types()) {
      const bool native = KernelRegistry::Cuda().LowPrecisionOf(type) == LowPrecision::kNative;
      if (native && type != "cast" && !covered.count(type)) uncovered += " " + type;
    }
    EXPECT_EQ(uncovered, "") << "native CUDA kernels no low-precision case runs:" << uncovered;
  }
}

// The cases' low-precision vars really are low precision on the CPU too:
// what the device tests compare is rounded, not an fp32 result.
TEST(CudaKernelsLowPrecision, TheCpuRunGivesLowPrecisionOutputs) {
  const std::vector<Case> cases = MatmulCases(proto::BF16);
  const Case& c = cases.front();
  std::map<std::string, Tensor> host = c.feeds;
  for (const Op* op : c.program.global_block().ops()) {
    ASSERT_TRUE(testing::RunOnCpu(*op, c.run, &host).ok()) << op->type();
  }
  for (const char* var : {"out", "x@GRAD", "y@GRAD"}) {
    ASSERT_TRUE(host.count(var)) << var;
    EXPECT_EQ(host.at(var).dtype(), proto::BF16) << var;
  }
}

TEST_F(CudaKernelsOnDevice, LowPrecisionMatmul) {
  for (DataType dt : {proto::BF16, proto::FP16}) {
    for (const Case& c : MatmulCases(dt)) Check(c);
  }
}
TEST_F(CudaKernelsOnDevice, LowPrecisionElementwiseAndReductions) {
  for (DataType dt : {proto::BF16, proto::FP16}) {
    for (const Case& c : ElementwiseCases(dt)) Check(c);
  }
}
TEST_F(CudaKernelsOnDevice, LowPrecisionActivationsNormsAndSoftmax) {
  for (DataType dt : {proto::BF16, proto::FP16}) {
    for (const Case& c : NormAndSoftmaxCases(dt)) Check(c);
  }
}
TEST_F(CudaKernelsOnDevice, LowPrecisionEmbeddingDropoutShapesFills) {
  for (DataType dt : {proto::BF16, proto::FP16}) {
    for (const Case& c : OtherCases(dt)) Check(c);
  }
}
TEST_F(CudaKernelsOnDevice, LowPrecisionRerunsGiveTheSameBits) {
  for (DataType dt : {proto::BF16, proto::FP16}) {
    for (const Case& c : AllCases(dt)) CheckRepeats(c);
  }
}

#endif  // LOOM_WITH_CUDA

}  // namespace
}  // namespace loom
