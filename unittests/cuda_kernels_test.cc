// The CUDA kernels (executor/kernels/cuda/): every op with a CPU kernel
// has one (runs wherever the build has CUDA), and, where there is a
// device, each computes what the CPU kernel computes on the same inputs,
// forward and backward ops alike, the same bits on a rerun, dropout's
// mask exactly, and the same validation errors. Without a device those
// tests skip, saying so: nothing here claims a GPU result that was not
// measured on one.
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "executor/kernel.h"

#ifdef LOOM_WITH_CUDA
#include "executor/fp32_shim.h"
#include "executor/kernels/cpu/vocab_parallel_cross_entropy.h"
#include "executor/kernels/cuda/vocab_parallel_cross_entropy.h"
#include "framework/op_builder.h"
#include "framework/program.h"
#include "framework/shape_inference.h"
#include "unittests/cuda_kernel_harness.h"
#include "unittests/grad_check.h"
#endif

namespace loom {
namespace {

#ifndef LOOM_WITH_CUDA
TEST(CudaKernels, NotBuilt) {
  RegisterAllCudaKernels();
  EXPECT_TRUE(KernelRegistry::Cuda().Types().empty());
  GTEST_SKIP() << "built without the CUDA backend (LOOM_CUDA=OFF, or configure found no "
                  "nvcc, CUDA toolkit and NCCL): no CUDA kernels to test";
}
#else

TEST(CudaKernels, EveryOpWithACpuKernelHasACudaKernel) {
  RegisterAllCpuKernels();
  RegisterAllCudaKernels();
  std::string missing;
  for (const std::string& type : KernelRegistry::Cpu().Types()) {
    if (KernelRegistry::Cuda().Find(type) == nullptr) missing += " " + type;
  }
  EXPECT_EQ(missing, "") << "ops with a CPU kernel but no CUDA kernel:" << missing;
  EXPECT_FALSE(KernelRegistry::Cuda().Types().empty());
}

// The CUDA kernels that stay fp32 only (LowPrecision::kWidened): the
// optimizers (AMP keeps master weights and moments fp32), the cross
// entropies (AMP keeps the loss fp32; their schemas want fp32 logits) and
// lr_schedule (an int64 counter and an fp32 rate, by its schema), and the
// gradient-norm ops (fp32 master gradients and scalars, framework/grad_clip.h).
const std::set<std::string>& Fp32OnlyCudaKernels() {
  static const std::set<std::string> kTypes = {"sgd",
                                               "adamw",
                                               "softmax_with_cross_entropy",
                                               "softmax_with_cross_entropy_grad",
                                               "c_softmax_with_cross_entropy",
                                               "c_softmax_with_cross_entropy_grad",
                                               "lr_schedule",
                                               "squared_l2_norm",
                                               "grad_scale",
                                               "update_loss_scale"};
  return kTypes;
}

// Every other CUDA kernel reads and writes bf16 and fp16 itself: one
// registered kWidened would make the executor refuse a low-precision
// program on CUDA (Fp32Shim::For), and this catches it without a device.
TEST(CudaKernels, EveryKernelButTheFp32OnlyOnesIsNative) {
  RegisterAllCudaKernels();
  std::string widened, native_fp32_only;
  for (const std::string& type : KernelRegistry::Cuda().Types()) {
    const bool native = KernelRegistry::Cuda().LowPrecisionOf(type) == LowPrecision::kNative;
    const bool fp32_only = Fp32OnlyCudaKernels().count(type) > 0;
    if (!native && !fp32_only) widened += " " + type;
    if (native && fp32_only) native_fp32_only += " " + type;
  }
  EXPECT_EQ(widened, "") << "CUDA kernels registered fp32 only (kWidened):" << widened;
  EXPECT_EQ(native_fp32_only, "") << "listed as fp32 only but registered kNative:"
                                  << native_fp32_only;
  for (const std::string& type : Fp32OnlyCudaKernels()) {
    EXPECT_NE(KernelRegistry::Cuda().Find(type), nullptr) << type;
  }
}

// The executor's answer for those on CUDA: a bf16 var of an fp32-only op
// is an error naming the op and the var; a native op needs no shim.
TEST(CudaKernels, TheExecutorRefusesLowPrecisionForAnFp32OnlyKernel) {
  RegisterAllCudaKernels();
  Program program;
  Block& block = program.global_block();
  for (const char* name : {"p", "g"}) SetMeta(TensorMeta{proto::BF16, {4, 3}}, block.AddVar(name));
  SetMeta(TensorMeta{proto::FP32, {1}}, block.AddVar("lr"));
  auto sgd = AppendOpInferShapes(block, OpDescBuilder("sgd")
                                            .Input("Param", "p")
                                            .Input("Grad", "g")
                                            .Input("LearningRate", "lr")
                                            .Output("ParamOut", "p"));
  ASSERT_TRUE(sgd.ok()) << sgd.status();
  auto shim = Fp32Shim::For(DeviceType::kCuda, **sgd, {}, {});
  ASSERT_FALSE(shim.ok());
  EXPECT_NE(shim.status().message().find("fp32 only"), std::string::npos) << shim.status();
  EXPECT_NE(shim.status().message().find("'p' is bf16"), std::string::npos) << shim.status();

  auto relu = AppendOpInferShapes(block, OpDescBuilder("relu").Input("X", "g").Output("Out", "r"));
  ASSERT_TRUE(relu.ok()) << relu.status();
  auto none = Fp32Shim::For(DeviceType::kCuda, **relu, {}, {});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->get(), nullptr);
}

using testing::Case;
using testing::CudaKernelsOnDevice;
using testing::Ids;
using testing::MakeCase;
using testing::RandomTensor;
using testing::RunOnCpu;

proto::OpDesc Matmul(bool tx, bool ty, float alpha) {
  return OpDescBuilder("matmul")
      .Input("X", "x")
      .Input("Y", "y")
      .Output("Out", "out")
      .Attr("transpose_x", tx)
      .Attr("transpose_y", ty)
      .Attr("alpha", alpha);
}

std::vector<Case> MatmulCases() {
  std::vector<Case> cases;
  for (bool tx : {false, true}) {
    for (bool ty : {false, true}) {
      const std::string how = std::string(tx ? "T" : "N") + (ty ? "T" : "N");
      const Shape x = tx ? Shape{2, 3, 5, 4} : Shape{2, 3, 4, 5};
      const Shape y_b = ty ? Shape{2, 3, 6, 5} : Shape{2, 3, 5, 6};
      const Shape y_s = ty ? Shape{6, 5} : Shape{5, 6};
      cases.push_back(MakeCase("batched " + how, Matmul(tx, ty, 0.5f),
                               {{"x", RandomTensor(x, 1)}, {"y", RandomTensor(y_b, 2)}}, {"out"}));
      cases.push_back(MakeCase("shared Y " + how, Matmul(tx, ty, 1.0f),
                               {{"x", RandomTensor(x, 3)}, {"y", RandomTensor(y_s, 4)}}, {"out"}));
    }
  }
  return cases;
}

std::vector<Case> ElementwiseCases() {
  std::vector<Case> cases;
  for (const char* type : {"elementwise_add", "elementwise_sub", "elementwise_mul"}) {
    const proto::OpDesc op =
        OpDescBuilder(type).Input("X", "x").Input("Y", "y").Output("Out", "out");
    cases.push_back(MakeCase(std::string(type) + " same", op,
                             {{"x", RandomTensor({4, 3, 5}, 1)}, {"y", RandomTensor({4, 3, 5}, 2)}},
                             {"out"}));
    cases.push_back(MakeCase(std::string(type) + " row", op,
                             {{"x", RandomTensor({4, 3, 5}, 1)}, {"y", RandomTensor({5}, 2)}},
                             {"out"}));
    cases.push_back(MakeCase(std::string(type) + " both", op,
                             {{"x", RandomTensor({4, 1, 5}, 1)}, {"y", RandomTensor({3, 1}, 2)}},
                             {"out"}));
    // A long reduced extent: the block-per-target path.
    cases.push_back(MakeCase(std::string(type) + " bias", op,
                             {{"x", RandomTensor({300, 40}, 1)}, {"y", RandomTensor({40}, 2)}},
                             {"out"}));
  }
  cases.push_back(MakeCase("scale",
                           OpDescBuilder("scale")
                               .Input("X", "x")
                               .Output("Out", "out")
                               .Attr("scale", 1.5f)
                               .Attr("bias", -0.25f),
                           {{"x", RandomTensor({7, 9}, 1)}}, {"out"}));
  std::map<std::string, Tensor> many;
  std::vector<std::string> names;
  for (int i = 0; i < 11; ++i) {
    names.push_back("x" + std::to_string(i));
    many[names.back()] = RandomTensor({6, 5}, 10 + i);
  }
  cases.push_back(MakeCase("sum of 11", OpDescBuilder("sum").Input("X", names).Output("Out", "out"),
                           many, {"out"}));
  for (const char* type : {"reduce_sum", "reduce_mean"}) {
    cases.push_back(MakeCase(std::string(type) + " dim 1",
                             OpDescBuilder(type)
                                 .Input("X", "x")
                                 .Output("Out", "out")
                                 .Attr("dims", std::vector<int32_t>{1}),
                             {{"x", RandomTensor({4, 70, 3}, 1)}}, {"out"}));
    cases.push_back(
        MakeCase(std::string(type) + " all",
                 OpDescBuilder(type).Input("X", "x").Output("Out", "out").Attr("reduce_all", true),
                 {{"x", RandomTensor({50, 33}, 2)}}, {"out"}));
  }
  return cases;
}

std::vector<Case> NormAndSoftmaxCases() {
  std::vector<Case> cases;
  for (bool approximate : {false, true}) {
    cases.push_back(MakeCase(
        "gelu",
        OpDescBuilder("gelu").Input("X", "x").Output("Out", "out").Attr("approximate", approximate),
        {{"x", RandomTensor({8, 33}, 1, -3.0f, 3.0f)}}, {"out"}));
  }
  cases.push_back(MakeCase("relu", OpDescBuilder("relu").Input("X", "x").Output("Out", "out"),
                           {{"x", testing::RandomTensorAwayFromZero({8, 33}, 2, 0.01f)}}, {"out"}));
  for (int32_t axis : {1, 2}) {
    const std::string name = "layer_norm axis " + std::to_string(axis);
    cases.push_back(MakeCase(name,
                             OpDescBuilder("layer_norm")
                                 .Input("X", "x")
                                 .Input("Scale", "scale")
                                 .Input("Bias", "bias")
                                 .Output("Y", "y")
                                 .Output("Mean", "mean")
                                 .Output("Variance", "var")
                                 .Attr("begin_norm_axis", axis),
                             {{"x", RandomTensor({6, 4, 300}, 1)},
                              {"scale", RandomTensor({axis == 1 ? 4 * 300 : 300}, 2)},
                              {"bias", RandomTensor({axis == 1 ? 4 * 300 : 300}, 3)}},
                             {"y"}));
  }
  cases.push_back(MakeCase("layer_norm no affine",
                           OpDescBuilder("layer_norm")
                               .Input("X", "x")
                               .Output("Y", "y")
                               .Output("Mean", "mean")
                               .Output("Variance", "var"),
                           {{"x", RandomTensor({70, 16}, 1)}}, {"y"}));
  cases.push_back(MakeCase("softmax last",
                           OpDescBuilder("softmax").Input("X", "x").Output("Out", "out"),
                           {{"x", RandomTensor({5, 600}, 1, -4.0f, 4.0f)}}, {"out"}));
  cases.push_back(MakeCase(
      "softmax inner",
      OpDescBuilder("softmax").Input("X", "x").Output("Out", "out").Attr("axis", int32_t{1}),
      {{"x", RandomTensor({3, 7, 5}, 2)}}, {"out"}));
  cases.push_back(
      MakeCase("softmax causal",
               OpDescBuilder("softmax").Input("X", "x").Output("Out", "out").Attr("causal", true),
               {{"x", RandomTensor({2, 3, 5, 7}, 3)}}, {"out"}));
  const Tensor label = Ids({6}, {0, 10, 3, 7, 3, 1});
  cases.push_back(MakeCase("softmax_with_cross_entropy",
                           OpDescBuilder("softmax_with_cross_entropy")
                               .Input("Logits", "logits")
                               .Input("Label", "label")
                               .Output("Softmax", "sm")
                               .Output("Loss", "xent")
                               .Attr("ignore_index", int32_t{7}),
                           {{"logits", RandomTensor({6, 11}, 4, -3.0f, 3.0f)}, {"label", label}},
                           {"xent"}));
  cases.push_back(MakeCase("c_softmax_with_cross_entropy",
                           OpDescBuilder("c_softmax_with_cross_entropy")
                               .Input("Logits", "logits")
                               .Input("Label", "label")
                               .Output("Softmax", "sm")
                               .Output("Loss", "xent")
                               .Attr("nranks", int32_t{1})
                               .Attr("rank", int32_t{0}),
                           {{"logits", RandomTensor({6, 11}, 5)}, {"label", label}}, {"xent"}));
  // The CPU's error for a label out of range, from the device's check.
  cases.push_back(MakeCase("bad label",
                           OpDescBuilder("softmax_with_cross_entropy")
                               .Input("Logits", "logits")
                               .Input("Label", "label")
                               .Output("Softmax", "sm")
                               .Output("Loss", "xent"),
                           {{"logits", RandomTensor({3, 4}, 6)}, {"label", Ids({3}, {1, 9, 2})}}));
  cases.back().expect_error = true;
  return cases;
}

std::vector<Case> OtherCases() {
  std::vector<Case> cases;
  // The scheduled rate after 5 steps, mid-decay, and the counter moved on.
  cases.push_back(MakeCase("lr_schedule",
                           OpDescBuilder("lr_schedule")
                               .Input("Step", "step")
                               .Output("LearningRate", "lr")
                               .Output("StepOut", "step_out")
                               .Attr("learning_rate", 0.01f)
                               .Attr("min_learning_rate", 0.001f)
                               .Attr("warmup_steps", int64_t{2})
                               .Attr("decay_steps", int64_t{10})
                               .Attr("decay", std::string("cosine")),
                           {{"step", Ids({1}, {5})}}));
  // The gradient norm over two inputs, one restricted to a segment; the
  // scale it gives (clipped, a loss scale undone); the loss scale halved
  // after an overflow.
  cases.push_back(MakeCase("squared_l2_norm",
                           OpDescBuilder("squared_l2_norm")
                               .Input("X", std::vector<std::string>{"a", "b"})
                               .Output("Out", "sq")
                               .Attr("segments", std::vector<int64_t>{0, 0, -1, 1, 100, 700}),
                           {{"a", RandomTensor({37}, 8)}, {"b", RandomTensor({30, 31}, 9)}}));
  cases.push_back(MakeCase("grad_scale",
                           OpDescBuilder("grad_scale")
                               .Input("SquaredNorm", "sq")
                               .Input("LossScale", "ls")
                               .Output("Scale", "scale")
                               .Output("Norm", "norm")
                               .Attr("max_norm", 1.0f),
                           {{"sq", MakeTensor(proto::FP32, {1}, {4.0e6f})},
                            {"ls", MakeTensor(proto::FP32, {1}, {1024.0f})}}));
  cases.push_back(MakeCase("update_loss_scale",
                           OpDescBuilder("update_loss_scale")
                               .Input("SquaredNorm", "sq")
                               .Input("LossScale", "ls")
                               .Input("GoodSteps", "good")
                               .Output("LossScaleOut", "ls_out")
                               .Output("GoodStepsOut", "good_out")
                               .Attr("growth_interval", int64_t{3}),
                           {{"sq", MakeTensor(proto::FP32, {1}, {std::numeric_limits<float>::infinity()})},
                            {"ls", MakeTensor(proto::FP32, {1}, {65536.0f})},
                            {"good", Ids({1}, {2})}}));
  // cast rounds to nearest even on both backends: the same bits.
  const std::vector<float> wide = RandomTensor({7, 9}, 4, -300.0f, 300.0f).ToFloatVector();
  for (auto [from, to] : {std::pair{proto::FP32, proto::BF16}, {proto::FP32, proto::FP16},
                          {proto::BF16, proto::FP32}, {proto::BF16, proto::FP16},
                          {proto::FP16, proto::BF16}}) {
    cases.push_back(MakeCase(StrCat("cast ", DataTypeName(from), " to ", DataTypeName(to)),
                             OpDescBuilder("cast")
                                 .Input("X", "x")
                                 .Output("Out", "out")
                                 .Attr("in_dtype", static_cast<int32_t>(from))
                                 .Attr("out_dtype", static_cast<int32_t>(to)),
                             {{"x", MakeTensor(from, {7, 9}, wide)}}));
  }
  cases.push_back(MakeCase("lookup_table",
                           OpDescBuilder("lookup_table")
                               .Input("W", "w")
                               .Input("Ids", "ids")
                               .Output("Out", "out")
                               .Attr("padding_idx", int64_t{2}),
                           {{"w", RandomTensor({20, 8}, 1)},
                            {"ids", Ids({3, 4}, {1, 2, 3, 19, 3, 3, 0, 5, 2, 7, 3, 1})}},
                           {"out"}));
  cases.push_back(
      MakeCase("lookup_table shard",
               OpDescBuilder("lookup_table")
                   .Input("W", "w")
                   .Input("Ids", "ids")
                   .Output("Out", "out")
                   .Attr("start_index", int64_t{10}),
               {{"w", RandomTensor({10, 6}, 2)}, {"ids", Ids({5}, {0, 12, 19, 12, 25})}}, {"out"}));
  cases.push_back(MakeCase(
      "lookup_table bad id",
      OpDescBuilder("lookup_table").Input("W", "w").Input("Ids", "ids").Output("Out", "out"),
      {{"w", RandomTensor({4, 3}, 3)}, {"ids", Ids({3}, {1, 4, -1})}}));
  cases.back().expect_error = true;
  for (int64_t step : {0, 7}) {
    Case c = MakeCase("dropout",
                      OpDescBuilder("dropout")
                          .Input("X", "x")
                          .Output("Out", "out")
                          .Output("Mask", "mask")
                          .Attr("dropout_prob", 0.3f)
                          .Attr("seed", int64_t{42}),
                      {{"x", RandomTensor({6, 5, 9}, 1)}}, {"out"});
    c.run = RunInfo{step, 3};
    cases.push_back(std::move(c));
  }
  cases.push_back(MakeCase("dropout shard",
                           OpDescBuilder("dropout")
                               .Input("X", "x")
                               .Output("Out", "out")
                               .Output("Mask", "mask")
                               .Attr("dropout_prob", 0.5f)
                               .Attr("seed", int64_t{9})
                               .Attr("full_shape", std::vector<int64_t>{8, 12})
                               .Attr("shard_offsets", std::vector<int64_t>{2, 4}),
                           {{"x", RandomTensor({3, 4, 6}, 2)}}, {"out"}));
  cases.push_back(MakeCase("dropout is_test",
                           OpDescBuilder("dropout")
                               .Input("X", "x")
                               .Output("Out", "out")
                               .Output("Mask", "mask")
                               .Attr("is_test", true),
                           {{"x", RandomTensor({4, 4}, 3)}}));
  const Tensor x = RandomTensor({4, 6, 5}, 1);
  cases.push_back(MakeCase("transpose",
                           OpDescBuilder("transpose")
                               .Input("X", "x")
                               .Output("Out", "out")
                               .Attr("perm", std::vector<int32_t>{2, 0, 1}),
                           {{"x", x}}, {"out"}));
  cases.push_back(MakeCase("reshape",
                           OpDescBuilder("reshape")
                               .Input("X", "x")
                               .Output("Out", "out")
                               .Attr("shape", std::vector<int64_t>{24, 5}),
                           {{"x", x}}, {"out"}));
  cases.push_back(MakeCase("slice",
                           OpDescBuilder("slice")
                               .Input("X", "x")
                               .Output("Out", "out")
                               .Attr("axes", std::vector<int32_t>{1, 2})
                               .Attr("starts", std::vector<int64_t>{1, -3})
                               .Attr("ends", std::vector<int64_t>{5, 5}),
                           {{"x", x}}, {"out"}));
  cases.push_back(MakeCase("split",
                           OpDescBuilder("split")
                               .Input("X", "x")
                               .Output("Out", std::vector<std::string>{"a", "b", "c"})
                               .Attr("axis", int32_t{1})
                               .Attr("sections", std::vector<int64_t>{1, -1, 2}),
                           {{"x", x}}, {"a", "c"}));
  cases.push_back(MakeCase("concat",
                           OpDescBuilder("concat")
                               .Input("X", std::vector<std::string>{"x", "y"})
                               .Output("Out", "out")
                               .Attr("axis", int32_t{2}),
                           {{"x", x}, {"y", RandomTensor({4, 6, 2}, 2)}}, {"out"}));
  cases.push_back(MakeCase("flat_concat",
                           OpDescBuilder("flat_concat")
                               .Input("X", std::vector<std::string>{"x", "y"})
                               .Output("Out", "out"),
                           {{"x", x}, {"y", RandomTensor({7}, 2)}}));
  cases.push_back(MakeCase("flat_split",
                           OpDescBuilder("flat_split")
                               .Input("X", "x")
                               .Output("Out", std::vector<std::string>{"a", "b"})
                               .Attr("offsets", std::vector<int64_t>{0, 6})
                               .Attr("dims", std::vector<int64_t>{2, 3, 6})
                               .Attr("ranks", std::vector<int32_t>{2, 1}),
                           {{"x", RandomTensor({12}, 3)}}));
  cases.push_back(MakeCase(
      "identity", OpDescBuilder("identity").Input("X", "x").Output("Out", "out"), {{"x", x}}));
  cases.push_back(MakeCase("fill_constant",
                           OpDescBuilder("fill_constant")
                               .Output("Out", "out")
                               .Attr("shape", std::vector<int64_t>{3, 5})
                               .Attr("value", 2.5f),
                           {}));
  cases.push_back(MakeCase("fill_constant int64",
                           OpDescBuilder("fill_constant")
                               .Output("Out", "out")
                               .Attr("shape", std::vector<int64_t>{4})
                               .Attr("value", 7.0f)
                               .Attr("dtype", int32_t{proto::INT64}),
                           {}));
  cases.push_back(MakeCase("gaussian_random",
                           OpDescBuilder("gaussian_random")
                               .Output("Out", "out")
                               .Attr("shape", std::vector<int64_t>{9, 4})
                               .Attr("seed", int64_t{5}),
                           {}));
  cases.push_back(MakeCase("uniform_random",
                           OpDescBuilder("uniform_random")
                               .Output("Out", "out")
                               .Attr("shape", std::vector<int64_t>{9, 4})
                               .Attr("seed", int64_t{6}),
                           {}));
  cases.push_back(MakeCase("sgd",
                           OpDescBuilder("sgd")
                               .Input("Param", "p")
                               .Input("Grad", "g")
                               .Input("LearningRate", "lr")
                               .Output("ParamOut", "p_out"),
                           {{"p", RandomTensor({5, 7}, 1)},
                            {"g", RandomTensor({5, 7}, 2)},
                            {"lr", MakeTensor({1}, std::vector<float>{0.1f})}}));
  cases.push_back(MakeCase("adamw",
                           OpDescBuilder("adamw")
                               .Input("Param", "p")
                               .Input("Grad", "g")
                               .Input("LearningRate", "lr")
                               .Input("Moment1", "m")
                               .Input("Moment2", "v")
                               .Input("Beta1Pow", "b1")
                               .Input("Beta2Pow", "b2")
                               .Output("ParamOut", "p_out")
                               .Output("Moment1Out", "m_out")
                               .Output("Moment2Out", "v_out")
                               .Output("Beta1PowOut", "b1_out")
                               .Output("Beta2PowOut", "b2_out"),
                           {{"p", RandomTensor({5, 7}, 1)},
                            {"g", RandomTensor({5, 7}, 2)},
                            {"lr", MakeTensor({1}, std::vector<float>{0.01f})},
                            {"m", RandomTensor({5, 7}, 3)},
                            {"v", RandomTensor({5, 7}, 4, 0.0f, 1.0f)},
                            {"b1", MakeTensor({1}, std::vector<float>{0.9f})},
                            {"b2", MakeTensor({1}, std::vector<float>{0.999f})}}));
  return cases;
}

// Rank 1 of 2 of a vocabulary-parallel cross entropy.
Case VocabShardCase() {
  return MakeCase("c_softmax_with_cross_entropy rank 1 of 2",
                  OpDescBuilder("c_softmax_with_cross_entropy")
                      .Input("Logits", "logits")
                      .Input("Label", "label")
                      .Output("Softmax", "sm")
                      .Output("Loss", "xent")
                      .Attr("nranks", int32_t{2})
                      .Attr("rank", int32_t{1})
                      .Attr("ignore_index", int32_t{3}),
                  {{"logits", RandomTensor({6, 300}, 4, -3.0f, 3.0f)},
                   {"label", Ids({6}, {0, 310, 3, 599, 300, 12})}});
}

// Every case, on the CPU alone (testing::ExpectCasesRunOnTheCpu), and
// every op with a CPU kernel run by one.
TEST(CudaKernelCases, RunOnTheCpu) {
  std::set<std::string> covered;
  for (auto* cases : {MatmulCases, ElementwiseCases, NormAndSoftmaxCases, OtherCases}) {
    testing::ExpectCasesRunOnTheCpu(cases(), &covered);
  }
  // With reductions that keep each shard's rows, the shard case runs too.
  const Case shard = VocabShardCase();
  std::map<std::string, Tensor> host = shard.feeds;
  const Op* op = *shard.program.global_block().ops().begin();
  const ShardReduceFn identity = [](const std::vector<Tensor*>&, bool) { return Status::OK(); };
  EXPECT_TRUE(
      RunOnCpu(*op, shard.run, &host,
               {op->type(),
                [&](const KernelContext& ctx) { return VocabParallelCrossEntropy(ctx, identity); }})
          .ok());
  // The device tests then compare every kernel.
  std::string uncovered;
  for (const std::string& type : KernelRegistry::Cpu().Types()) {
    if (!covered.count(type)) uncovered += " " + type;
  }
  EXPECT_EQ(uncovered, "") << "ops no case runs:" << uncovered;
}

TEST_F(CudaKernelsOnDevice, Matmul) {
  for (const Case& c : MatmulCases()) Check(c);
}
TEST_F(CudaKernelsOnDevice, ElementwiseAndReductions) {
  for (const Case& c : ElementwiseCases()) Check(c);
}
TEST_F(CudaKernelsOnDevice, ActivationsNormsAndSoftmax) {
  for (const Case& c : NormAndSoftmaxCases()) Check(c);
}
TEST_F(CudaKernelsOnDevice, EmbeddingDropoutShapesFillsOptimizers) {
  for (const Case& c : OtherCases()) Check(c);
}
// The vocabulary-parallel cross entropy of rank 1 of 2, with reductions
// that leave each shard's rows as they are (one process has no peers):
// the device version's steps against the CPU's, on the same rows.
TEST_F(CudaKernelsOnDevice, VocabParallelCrossEntropyOverShards) {
  const ShardReduceFn identity = [](const std::vector<Tensor*>&, bool) { return Status::OK(); };
  const Case c = VocabShardCase();
  Check(c,
        {"c_softmax_with_cross_entropy",
         [&](const KernelContext& ctx) { return VocabParallelCrossEntropy(ctx, identity); }},
        {"c_softmax_with_cross_entropy",
         [&](const KernelContext& ctx) { return VocabParallelCrossEntropyCuda(ctx, identity); }});
  // Without reductions: the CPU's error.
  Check(c);
}

TEST_F(CudaKernelsOnDevice, RerunsGiveTheSameBits) {
  for (auto* cases : {MatmulCases, ElementwiseCases, NormAndSoftmaxCases, OtherCases}) {
    for (const Case& c : cases()) CheckRepeats(c);
  }
}

#endif  // LOOM_WITH_CUDA

}  // namespace
}  // namespace loom
