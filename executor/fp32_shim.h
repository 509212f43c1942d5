// Running an fp32-only CPU kernel on bf16 and fp16 tensors, as a GPU kernel
// with fp32 accumulation runs: the kernel gets fp32 copies of the op's
// low-precision inputs, computes in fp32, and what it writes is rounded to
// nearest even into the low-precision outputs. One shim per bound op, made
// when the executor binds it; ops with no low-precision var get none and run
// as before.
#ifndef LOOM_EXECUTOR_FP32_SHIM_H_
#define LOOM_EXECUTOR_FP32_SHIM_H_

#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "executor/kernel.h"
#include "framework/program.h"

namespace loom {

class Fp32Shim {
 public:
  // For `op` bound to `inputs` and `outputs` (its slots in desc order, as the
  // executors bind them) on a `device` of that type: null when no var of the
  // op is bf16 or fp16, or when its kernel reads and writes them itself. An
  // error where a device kernel would need one (only CPU kernels are
  // widened).
  static StatusOr<std::unique_ptr<Fp32Shim>> For(DeviceType device, const Op& op,
                                                 const std::vector<BoundSlot>& inputs,
                                                 const std::vector<BoundSlot>& outputs);

  // Widens the inputs, runs `kernel` on the fp32 copies, rounds its results
  // into the outputs, and frees the copies. The outputs must be allocated.
  Status Run(KernelFn kernel, const proto::OpDesc& desc, const RunInfo& run, Device* device,
             Stream* stream);

 private:
  Fp32Shim() = default;
  // The fp32 stand-in for `real`, one per distinct tensor, so that an op
  // updating a tensor in place (its input and output the same var) reads
  // and writes one copy.
  Tensor* ShadowOf(Tensor* real);

  std::deque<std::pair<Tensor*, Tensor>> shadows_;  // real -> its fp32 copy
  std::vector<std::pair<const Tensor*, Tensor*>> widen_;  // before the kernel
  std::vector<std::pair<Tensor*, Tensor*>> narrow_;       // after it
  std::vector<BoundSlot> inputs_, outputs_;               // over the copies
};

}  // namespace loom

#endif  // LOOM_EXECUTOR_FP32_SHIM_H_
