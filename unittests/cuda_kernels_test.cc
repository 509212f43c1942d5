// The CUDA kernels (executor/kernels/cuda/): every op with a CPU kernel
// has one (runs wherever the build has CUDA), and, where there is a
// device, each computes what the CPU kernel computes on the same inputs,
// forward and backward ops alike, the same bits on a rerun, dropout's
// mask exactly, and the same validation errors. Without a device those
// tests skip, saying so: nothing here claims a GPU result that was not
// measured on one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "executor/kernel.h"

#ifdef LOOM_WITH_CUDA
#include "executor/cuda/cuda_device.h"
#include "executor/cuda/cuda_probe.h"
#include "executor/kernels/cpu/cpu_helpers.h"
#include "executor/kernels/cpu/vocab_parallel_cross_entropy.h"
#include "executor/kernels/cuda/cuda_kernel_helpers.h"
#include "executor/kernels/cuda/vocab_parallel_cross_entropy.h"
#include "framework/autodiff.h"
#include "framework/counter_rng.h"
#include "framework/op_builder.h"
#include "framework/program.h"
#include "framework/shape_inference.h"
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

using testing::RandomTensor;

// One op program, optionally with its backward: the op's float outputs
// named in `loss_outputs` are weighted by random values and summed into a
// loss, and AppendBackward adds the real grad ops (and the weighting ops'
// own), so every op of the block runs on inputs the one before made.
struct Case {
  std::string name;
  Program program;
  std::map<std::string, Tensor> feeds;
  RunInfo run;
  bool expect_error = false;  // a CPU kernel rejects its inputs
};

Case MakeCase(const std::string& name, const proto::OpDesc& desc,
              std::map<std::string, Tensor> feeds,
              const std::vector<std::string>& loss_outputs = {}) {
  RegisterAllCpuKernels();
  RegisterAllCudaKernels();
  Case c;
  c.name = name;
  Block& block = c.program.global_block();
  for (const auto& [var, t] : feeds) {
    proto::VarDesc* v = block.AddVar(var);
    SetMeta(t.meta(), v);
    // Float inputs are parameters where there is a backward, so that
    // autodiff differentiates them.
    const bool param = !loss_outputs.empty() && t.dtype() == proto::FP32;
    v->set_persistable(param);
    v->set_is_parameter(param);
    v->set_is_data(!param);
  }
  auto op = AppendOpInferShapes(block, desc);
  CHECK(op.ok()) << name << ": " << op.status();
  if (!loss_outputs.empty()) {
    std::vector<std::string> losses;
    uint64_t seed = 500;
    for (const std::string& out : loss_outputs) {
      const std::string w = out + ".weight";
      feeds[w] = RandomTensor(MetaOf(*block.FindVar(out)).shape, seed++);
      SetMeta(feeds[w].meta(), block.AddVar(w));
      block.FindVar(w)->set_is_data(true);
      CHECK(AppendOpInferShapes(block, OpDescBuilder("elementwise_mul")
                                           .Input("X", out)
                                           .Input("Y", w)
                                           .Output("Out", out + ".weighted"))
                .ok());
      CHECK(AppendOpInferShapes(block, OpDescBuilder("reduce_sum")
                                           .Input("X", out + ".weighted")
                                           .Output("Out", out + ".loss")
                                           .Attr("reduce_all", true))
                .ok());
      losses.push_back(out + ".loss");
    }
    CHECK(AppendOpInferShapes(block,
                              OpDescBuilder("sum").Input("X", losses).Output("Out", "case.loss"))
              .ok());
    auto pairs = AppendBackward(c.program, "case.loss");
    CHECK(pairs.ok()) << name << ": " << pairs.status();
  }
  c.feeds = std::move(feeds);
  return c;
}

Tensor Ids(const Shape& shape, std::vector<int64_t> values) { return MakeTensor(shape, values); }

// Element-by-element checks of relative error for these; the rest get
// the looser bound of kernels that sum in another order.
bool IsElementwise(const std::string& type) {
  static const char* const kTypes[] = {"gelu",
                                       "gelu_grad",
                                       "relu",
                                       "relu_grad",
                                       "scale",
                                       "elementwise_add",
                                       "elementwise_sub",
                                       "elementwise_mul",
                                       "dropout",
                                       "dropout_grad",
                                       "identity",
                                       "reshape",
                                       "reshape_grad",
                                       "transpose",
                                       "slice",
                                       "slice_grad",
                                       "split",
                                       "concat",
                                       "concat_grad",
                                       "flat_concat",
                                       "flat_split",
                                       "fill_constant",
                                       "gaussian_random",
                                       "uniform_random",
                                       "sgd",
                                       "adamw",
                                       "lookup_table",
                                       "reduce_sum_grad",
                                       "reduce_mean_grad"};
  return std::find(std::begin(kTypes), std::end(kTypes), type) != std::end(kTypes);
}

// Runs `op`'s CPU kernel on the host values of its inputs, into fresh
// outputs stored back into `host` by var.
// A kernel to run in place of the registry's, for ops of its type.
struct Override {
  std::string type;
  std::function<Status(const KernelContext&)> fn;
};

Status RunKernel(const Op& op, const KernelContext& ctx, const Override& o, bool cuda) {
  if (!o.type.empty() && op.type() == o.type) return o.fn(ctx);
  return (cuda ? KernelRegistry::Cuda() : KernelRegistry::Cpu()).Find(op.type())(ctx);
}

Status RunOnCpu(const Op& op, const RunInfo& run, std::map<std::string, Tensor>* host,
                const Override& o = {}) {
  std::vector<std::unique_ptr<Tensor>> keep;
  std::map<std::string, Tensor*> outputs;
  auto bind = [&](const auto& slots, bool inputs) {
    std::vector<BoundSlot> bound;
    for (const auto& slot : slots) {
      BoundSlot b{slot.name(), {}};
      for (const std::string& var : slot.vars()) {
        if (var.empty()) {
          b.tensors.push_back(nullptr);
        } else if (inputs) {
          b.tensors.push_back(&host->at(var));
        } else {
          keep.push_back(std::make_unique<Tensor>(MetaOf(*op.block()->FindVar(var))));
          outputs[var] = keep.back().get();
          b.tensors.push_back(keep.back().get());
        }
      }
      bound.push_back(std::move(b));
    }
    return bound;
  };
  const std::vector<BoundSlot> ins = bind(op.desc().inputs(), true);
  const std::vector<BoundSlot> outs = bind(op.desc().outputs(), false);
  LOOM_RETURN_IF_ERROR(RunKernel(op, KernelContext(op.desc(), ins, outs, run), o, /*cuda=*/false));
  for (const auto& [var, t] : outputs) (*host)[var] = *t;
  return Status::OK();
}

class CudaKernelsOnDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    const CudaProbe probe = ProbeCuda();
    if (probe.devices == 0) {
      GTEST_SKIP() << "no CUDA device (" << probe.why_none << "; runtime " << probe.runtime_version
                   << ", driver " << probe.driver_version
                   << "): the CUDA kernels compiled and linked but were not run";
    }
    auto device = CudaDevice::Create(0);
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = std::move(device).value();
    auto stream = device_->CreateStream(StreamOptions{});
    ASSERT_TRUE(stream.ok()) << stream.status();
    stream_ = std::move(stream).value();
  }

  // Runs `op` on the device with copies of `in` (host tensors by var),
  // into fresh outputs copied back to the host.
  Status RunOnDevice(const Op& op, const std::map<std::string, Tensor>& in, const RunInfo& run,
                     std::map<std::string, Tensor>* out, const Override& o = {}) {
    std::vector<std::unique_ptr<Tensor>> keep;
    auto bind = [&](const auto& slots, bool inputs, std::vector<BoundSlot>* bound) -> Status {
      for (const auto& slot : slots) {
        BoundSlot b{slot.name(), {}};
        for (const std::string& var : slot.vars()) {
          if (var.empty()) {
            b.tensors.push_back(nullptr);
            continue;
          }
          keep.push_back(std::make_unique<Tensor>());
          Tensor* t = keep.back().get();
          const TensorMeta meta = inputs ? in.at(var).meta() : MetaOf(*op.block()->FindVar(var));
          LOOM_RETURN_IF_ERROR(t->Resize(meta, device_.get(), stream_.get()));
          if (inputs) {
            LOOM_RETURN_IF_ERROR(device_->CopyFromHost(t->raw_data(), in.at(var).raw_data(),
                                                       t->bytes(), stream_.get()));
          }
          b.tensors.push_back(t);
        }
        bound->push_back(std::move(b));
      }
      return Status::OK();
    };
    std::vector<BoundSlot> ins, outs;
    LOOM_RETURN_IF_ERROR(bind(op.desc().inputs(), true, &ins));
    LOOM_RETURN_IF_ERROR(bind(op.desc().outputs(), false, &outs));
    LOOM_RETURN_IF_ERROR(stream_->Synchronize());
    const KernelContext ctx(op.desc(), ins, outs, run, device_.get(), stream_.get());
    LOOM_RETURN_IF_ERROR(RunKernel(op, ctx, o, /*cuda=*/true));
    LOOM_RETURN_IF_ERROR(stream_->Synchronize());
    // outs follows the op's output slots in order.
    for (int k = 0; k < op.desc().outputs_size(); ++k) {
      const auto& vars = op.desc().outputs(k).vars();
      for (int i = 0; i < vars.size(); ++i) {
        const Tensor* t = outs[k].tensors[i];
        if (t == nullptr) continue;
        Tensor& host = (*out)[vars[i]];
        host.Resize(t->meta());
        LOOM_RETURN_IF_ERROR(
            device_->CopyToHost(host.raw_data(), t->raw_data(), host.bytes(), stream_.get()));
      }
    }
    return Status::OK();
  }

  // Runs every op of the case on the CPU, feeding each the CPU's values,
  // and the same op on the device with the same inputs (twice: the bits
  // must repeat); compares outputs and statuses.
  void Check(const Case& c, const Override& on_cpu = {}, const Override& on_cuda = {}) {
    std::map<std::string, Tensor> host = c.feeds;
    for (const Op* op : c.program.global_block().ops()) {
      SCOPED_TRACE(c.name + ": " + op->type());
      // The device first: the CPU run overwrites in-place inputs in `host`.
      std::map<std::string, Tensor> dev, again;
      const Status gpu = RunOnDevice(*op, host, c.run, &dev, on_cuda);
      const Status cpu = RunOnCpu(*op, c.run, &host, on_cpu);
      EXPECT_EQ(gpu.ToString(), cpu.ToString());
      if (!cpu.ok() || !gpu.ok()) return;
      const double rtol = IsElementwise(op->type()) ? 1e-5 : 1e-4;
      const double atol = IsElementwise(op->type()) ? 1e-6 : 1e-5;
      for (const auto& [var, actual] : dev) {
        const Tensor& expected = host.at(var);
        ASSERT_EQ(actual.meta(), expected.meta()) << var;
        if (expected.dtype() != proto::FP32) {
          // Masks, ids: exactly the CPU's.
          EXPECT_EQ(std::memcmp(actual.raw_data(), expected.raw_data(), actual.bytes()), 0) << var;
          continue;
        }
        const float* a = actual.data<float>();
        const float* e = expected.data<float>();
        int bad = 0;
        for (int64_t i = 0; i < actual.numel() && bad < 5; ++i) {
          if (std::fabs(a[i] - e[i]) > atol + rtol * std::fabs(e[i])) {
            ++bad;
            ADD_FAILURE() << var << "[" << i << "]: CUDA " << a[i] << ", CPU " << e[i];
          }
        }
      }
    }
  }

  // Same inputs, twice on the device: the same bits.
  void CheckRepeats(const Case& c) {
    std::map<std::string, Tensor> host = c.feeds;
    for (const Op* op : c.program.global_block().ops()) {
      SCOPED_TRACE(c.name + ": " + op->type());
      std::map<std::string, Tensor> first, second;
      const Status s1 = RunOnDevice(*op, host, c.run, &first);
      const Status s2 = RunOnDevice(*op, host, c.run, &second);
      ASSERT_EQ(s1.ToString(), s2.ToString());
      if (!s1.ok()) return;
      for (const auto& [var, t] : first) {
        EXPECT_EQ(std::memcmp(t.raw_data(), second.at(var).raw_data(), t.bytes()), 0)
            << var << " differs between two runs of the CUDA kernel";
      }
      ASSERT_TRUE(RunOnCpu(*op, c.run, &host).ok());
    }
  }

  std::unique_ptr<CudaDevice> device_;
  std::unique_ptr<Stream> stream_;
};

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

// Every case, on the CPU alone: the cases are valid programs whose CPU
// kernels run (or fail as the error cases mean to), so that a run on a
// device tests the CUDA kernels, not the cases.
TEST(CudaKernelCases, RunOnTheCpu) {
  std::set<std::string> covered;
  for (auto* cases : {MatmulCases, ElementwiseCases, NormAndSoftmaxCases, OtherCases}) {
    for (const Case& c : cases()) {
      for (const Op* op : c.program.global_block().ops()) covered.insert(op->type());
      std::map<std::string, Tensor> host = c.feeds;
      bool failed = false;
      for (const Op* op : c.program.global_block().ops()) {
        const Status s = RunOnCpu(*op, c.run, &host);
        failed = failed || !s.ok();
        if (!s.ok()) {
          EXPECT_TRUE(c.expect_error) << c.name << ": " << op->type() << ": " << s;
          break;
        }
      }
      EXPECT_EQ(failed, c.expect_error) << c.name;
    }
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
