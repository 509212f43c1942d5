// Kernels: the code that runs an op on a device. Kernels are registered by
// op type in a KernelRegistry, apart from the op schemas in framework/, so
// the IR never depends on a device.
#ifndef LOOM_EXECUTOR_KERNEL_H_
#define LOOM_EXECUTOR_KERNEL_H_

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "executor/stream.h"
#include "executor/tensor.h"
#include "framework/op_registry.h"
#include "framework/status.h"

namespace loom {

// Tensors bound to one op's slots. The executor resolves names to tensors
// once, when it prepares a program, and allocates every output with its
// declared meta before the kernel runs: a kernel only computes.
struct BoundSlot {
  std::string name;
  std::vector<Tensor*> tensors;  // nullptr where the var is pruned ("")
};

// What a kernel may know of the run beyond its op and tensors. Per step
// and per micro-batch, so it comes from the executor, never from the plan:
// a plan is the same for every step and every dp replica. Dropout keys its
// mask on it (framework/ops/dropout.cc). Code that runs kernels outside
// training (profilers, benchmarks, tests) keeps the defaults.
struct RunInfo {
  int64_t step = 0;  // the training step
  // The global batch row of the fed batch's row 0: nonzero for a dp
  // replica's or a micro-batch's share of the global batch.
  int64_t row_offset = 0;
  // This rank's place in each ring, by ring id (scheduler/layout.h), -1 on
  // rings it is not on; null outside a rank executor. What a kernel over a
  // ZeRO part needs to know which part it holds (squared_l2_norm).
  const std::vector<int>* ring_index = nullptr;
};

class Device;

class KernelContext {
 public:
  // `device` and `stream`: where the kernel runs (a device kernel issues
  // its work on the stream); nullptr for CPU kernels run outside a rank
  // executor, which ignore them.
  KernelContext(const proto::OpDesc& desc, const std::vector<BoundSlot>& inputs,
                const std::vector<BoundSlot>& outputs, const RunInfo& run = RunInfo(),
                Device* device = nullptr, Stream* stream = nullptr)
      : desc_(desc), inputs_(inputs), outputs_(outputs), run_(run), device_(device),
        stream_(stream) {}

  const proto::OpDesc& desc() const { return desc_; }
  const std::string& type() const { return desc_.type(); }
  const RunInfo& run() const { return run_; }
  Device* device() const { return device_; }
  Stream* stream() const { return stream_; }

  int InputCount(const std::string& slot) const;
  bool HasInput(const std::string& slot) const;
  const Tensor& Input(const std::string& slot, int i = 0) const;
  int OutputCount(const std::string& slot) const;
  // False when the output is absent or pruned; kernels skip that work.
  bool HasOutput(const std::string& slot, int i = 0) const;
  Tensor* Output(const std::string& slot, int i = 0) const;

  template <typename T>
  T Attr(const std::string& name) const {
    const proto::Attr* a = FindAttrOrDefault(desc_, name);
    CHECK(a != nullptr) << type() << " has no attribute " << name;
    return AttrValue<T>::Get(*a);
  }

 private:
  const BoundSlot* Find(const std::vector<BoundSlot>& slots,
                        const std::string& name) const;
  const proto::OpDesc& desc_;
  const std::vector<BoundSlot>& inputs_;
  const std::vector<BoundSlot>& outputs_;
  const RunInfo run_;
  Device* device_;
  Stream* stream_;
};

using KernelFn = Status (*)(const KernelContext&);

// How a kernel meets bf16 and fp16 tensors.
enum class LowPrecision : uint8_t {
  // It computes on fp32 tensors only. On the CPU the executor hands it fp32
  // copies of its bf16/fp16 tensors and rounds what it writes back
  // (fp32_shim.h); a CUDA kernel must be native.
  kWidened,
  // It reads and writes them itself (cast; kernels templated per dtype).
  kNative,
};

// One registry per device type; an op runs on a device only if that
// device's registry has its kernel (`loom ops` lists which do).
class KernelRegistry {
 public:
  static KernelRegistry& Cpu();
  static KernelRegistry& Cuda();
  static KernelRegistry& For(DeviceType type);
  void Register(const std::string& type, KernelFn fn,
                LowPrecision low_precision = LowPrecision::kWidened);
  KernelFn Find(const std::string& type) const;
  // kWidened for a type with no kernel.
  LowPrecision LowPrecisionOf(const std::string& type) const;
  std::vector<std::string> Types() const;

 private:
  struct Entry {
    KernelFn fn;
    LowPrecision low_precision;
  };
  std::unordered_map<std::string, Entry> kernels_;
};

// Registers every CPU kernel once (and every op schema). Idempotent.
void RegisterAllCpuKernels();
// Registers every CUDA kernel once, where the build has the CUDA backend
// (LOOM_WITH_CUDA); otherwise does nothing. Idempotent.
void RegisterAllCudaKernels();

}  // namespace loom

#endif  // LOOM_EXECUTOR_KERNEL_H_
