// What the CUDA kernel tests share (cuda_kernels_test.cc, fp32, and
// cuda_kernels_low_precision_test.cc, bf16 and fp16): one-op programs with
// their backward (Case), a run of each op on the CPU kernels, and a
// fixture that runs the same op on a device and compares. Without a device
// the fixture's tests skip, saying so. Only where the build has CUDA.
#ifndef LOOM_UNITTESTS_CUDA_KERNEL_HARNESS_H_
#define LOOM_UNITTESTS_CUDA_KERNEL_HARNESS_H_

#ifdef LOOM_WITH_CUDA

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "executor/cuda/cuda_device.h"
#include "executor/kernel.h"
#include "framework/program.h"

namespace loom {
namespace testing {

// One op program, optionally with its backward: the op's float outputs
// named in `loss_outputs` are weighted by random values (of the output's
// dtype) and summed into a loss, and AppendBackward adds the real grad ops
// (and the weighting ops' own), so every op of the block runs on inputs
// the one before made.
struct Case {
  std::string name;
  Program program;
  std::map<std::string, Tensor> feeds;
  RunInfo run;
  bool expect_error = false;  // a CPU kernel rejects its inputs
};

// Float feeds (fp32, bf16, fp16) are parameters where there is a backward,
// so that autodiff differentiates them; the others are data.
Case MakeCase(const std::string& name, const proto::OpDesc& desc,
              std::map<std::string, Tensor> feeds,
              const std::vector<std::string>& loss_outputs = {});

// An int64 tensor of ids or labels.
Tensor Ids(const Shape& shape, std::vector<int64_t> values);

// A kernel to run in place of the registry's, for ops of its type.
struct Override {
  std::string type;
  std::function<Status(const KernelContext&)> fn;
};

// Runs `op`'s CPU kernel on the host values of its inputs (`host`, by
// var), into fresh outputs stored back into `host`. An op with bf16/fp16
// vars runs as the executors run it: through Fp32Shim (its fp32-only
// kernel on widened copies, the outputs rounded once). An override runs
// unshimmed.
Status RunOnCpu(const Op& op, const RunInfo& run, std::map<std::string, Tensor>* host,
                const Override& o = {});

// Every op of every case on the CPU alone: the cases are valid programs
// whose CPU kernels run (or fail as the error cases mean to), so that a run
// on a device tests the CUDA kernels, not the cases. Adds the op types the
// cases run to `covered`.
void ExpectCasesRunOnTheCpu(const std::vector<Case>& cases, std::set<std::string>* covered);

class CudaKernelsOnDevice : public ::testing::Test {
 protected:
  void SetUp() override;

  // Runs `op` on the device with copies of `in` (host tensors by var),
  // into fresh outputs copied back to the host.
  Status RunOnDevice(const Op& op, const std::map<std::string, Tensor>& in, const RunInfo& run,
                     std::map<std::string, Tensor>* out, const Override& o = {});

  // Runs every op of the case on the CPU, feeding each the CPU's values,
  // and the same op on the device with the same inputs; compares outputs
  // and statuses. fp32 outputs within a relative bound (tighter for
  // elementwise ops); ints and bools exactly; bf16/fp16 outputs of ops
  // that compute each element with the CPU's float operations in its order
  // exactly, and the others within the fp32 bound plus one ulp of their
  // dtype (the rounding of two floats that differ slightly).
  void Check(const Case& c, const Override& on_cpu = {}, const Override& on_cuda = {});

  // Same inputs, twice on the device: the same bits.
  void CheckRepeats(const Case& c);

  std::unique_ptr<CudaDevice> device_;
  std::unique_ptr<Stream> stream_;
};

}  // namespace testing
}  // namespace loom

#endif  // LOOM_WITH_CUDA

#endif  // LOOM_UNITTESTS_CUDA_KERNEL_HARNESS_H_
