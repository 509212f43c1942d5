#include "unittests/cuda_kernel_harness.h"

#ifdef LOOM_WITH_CUDA

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>

#include "executor/cuda/cuda_probe.h"
#include "executor/fp32_shim.h"
#include "framework/autodiff.h"
#include "framework/low_precision.h"
#include "framework/op_builder.h"
#include "framework/shape_inference.h"
#include "unittests/grad_check.h"

namespace loom {
namespace testing {
namespace {

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

// Ops whose CUDA kernel makes each output element with the CPU kernel's
// float operations in the CPU's order (no transcendental, no multiply-add
// the GPU could fuse, no sum in another order): a bf16/fp16 output, the
// one float rounded once, is the CPU's bits.
bool RoundsAlike(const std::string& type) {
  static const char* const kTypes[] = {
      "relu",          "relu_grad",  "elementwise_add",   "elementwise_sub",  "elementwise_mul",
      "sum",           "dropout",    "dropout_grad",      "identity",         "reshape",
      "reshape_grad",  "transpose",  "slice",             "slice_grad",       "split",
      "concat",        "concat_grad", "flat_concat",      "flat_split",       "fill_constant",
      "gaussian_random", "uniform_random", "lookup_table", "lookup_table_grad", "cast",
      "reduce_sum_grad", "reduce_mean_grad"};
  return std::find(std::begin(kTypes), std::end(kTypes), type) != std::end(kTypes);
}

// The spacing of `dtype`'s values at magnitude |v| (its subnormals' below
// the smallest normal).
double UlpOf(DataType dtype, double v) {
  const int mantissa_bits = dtype == proto::BF16 ? 7 : 10;
  const int min_exponent = dtype == proto::BF16 ? -126 : -14;
  const int e = v == 0.0 ? min_exponent : std::max(std::ilogb(v), min_exponent);
  return std::ldexp(1.0, e - mantissa_bits);
}

Status RunKernel(const Op& op, const KernelContext& ctx, const Override& o, bool cuda) {
  if (!o.type.empty() && op.type() == o.type) return o.fn(ctx);
  return (cuda ? KernelRegistry::Cuda() : KernelRegistry::Cpu()).Find(op.type())(ctx);
}

}  // namespace

Case MakeCase(const std::string& name, const proto::OpDesc& desc,
              std::map<std::string, Tensor> feeds, const std::vector<std::string>& loss_outputs) {
  RegisterAllCpuKernels();
  RegisterAllCudaKernels();
  Case c;
  c.name = name;
  Block& block = c.program.global_block();
  for (const auto& [var, t] : feeds) {
    proto::VarDesc* v = block.AddVar(var);
    SetMeta(t.meta(), v);
    const bool param = !loss_outputs.empty() && IsComputeFloat(t.dtype());
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
      const TensorMeta meta = MetaOf(*block.FindVar(out));
      feeds[w] = RandomTensor(meta.shape, seed++);
      if (IsLowPrecision(meta.dtype)) {
        feeds[w] = MakeTensor(meta.dtype, meta.shape, feeds[w].ToFloatVector());
      }
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

Status RunOnCpu(const Op& op, const RunInfo& run, std::map<std::string, Tensor>* host,
                const Override& o) {
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
  std::unique_ptr<Fp32Shim> shim;
  if (o.type.empty() || op.type() != o.type) {
    LOOM_ASSIGN_OR_RETURN(shim, Fp32Shim::For(DeviceType::kCpu, op, ins, outs));
  }
  if (shim != nullptr) {
    LOOM_RETURN_IF_ERROR(
        shim->Run(KernelRegistry::Cpu().Find(op.type()), op.desc(), run, nullptr, nullptr));
  } else {
    LOOM_RETURN_IF_ERROR(
        RunKernel(op, KernelContext(op.desc(), ins, outs, run), o, /*cuda=*/false));
  }
  for (const auto& [var, t] : outputs) (*host)[var] = *t;
  return Status::OK();
}

void ExpectCasesRunOnTheCpu(const std::vector<Case>& cases, std::set<std::string>* covered) {
  for (const Case& c : cases) {
    for (const Op* op : c.program.global_block().ops()) covered->insert(op->type());
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

void CudaKernelsOnDevice::SetUp() {
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

Status CudaKernelsOnDevice::RunOnDevice(const Op& op, const std::map<std::string, Tensor>& in,
                                        const RunInfo& run, std::map<std::string, Tensor>* out,
                                        const Override& o) {
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

void CudaKernelsOnDevice::Check(const Case& c, const Override& on_cpu, const Override& on_cuda) {
  std::map<std::string, Tensor> host = c.feeds;
  for (const Op* op : c.program.global_block().ops()) {
    SCOPED_TRACE(c.name + ": " + op->type());
    // The device first: the CPU run overwrites in-place inputs in `host`.
    std::map<std::string, Tensor> dev;
    const Status gpu = RunOnDevice(*op, host, c.run, &dev, on_cuda);
    const Status cpu = RunOnCpu(*op, c.run, &host, on_cpu);
    EXPECT_EQ(gpu.ToString(), cpu.ToString());
    if (!cpu.ok() || !gpu.ok()) return;
    const double rtol = IsElementwise(op->type()) ? 1e-5 : 1e-4;
    const double atol = IsElementwise(op->type()) ? 1e-6 : 1e-5;
    for (const auto& [var, actual] : dev) {
      const Tensor& expected = host.at(var);
      ASSERT_EQ(actual.meta(), expected.meta()) << var;
      const DataType dtype = expected.dtype();
      if (!IsComputeFloat(dtype) || (IsLowPrecision(dtype) && RoundsAlike(op->type()))) {
        // Masks, ids, and low-precision results rounded from the same float:
        // exactly the CPU's.
        EXPECT_EQ(std::memcmp(actual.raw_data(), expected.raw_data(), actual.bytes()), 0) << var;
        continue;
      }
      const std::vector<float> a = actual.ToFloatVector();
      const std::vector<float> e = expected.ToFloatVector();
      int bad = 0;
      for (size_t i = 0; i < a.size() && bad < 5; ++i) {
        double bound = atol + rtol * std::fabs(e[i]);
        if (IsLowPrecision(dtype)) {
          bound += UlpOf(dtype, std::max(std::fabs(double{a[i]}), std::fabs(double{e[i]})));
        }
        if (!(std::fabs(double{a[i]} - double{e[i]}) <= bound)) {
          ++bad;
          ADD_FAILURE() << var << "[" << i << "] (" << DataTypeName(dtype) << "): CUDA " << a[i]
                        << ", CPU " << e[i];
        }
      }
    }
  }
}

void CudaKernelsOnDevice::CheckRepeats(const Case& c) {
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

}  // namespace testing
}  // namespace loom

#endif  // LOOM_WITH_CUDA
