// Runs block 0 of a program, one op after another, over a Scope: on the
// CPU, or on a device's stream (the op profiler times a device's kernels
// this way).
//
// Setup apart from execution: Create() verifies the program, resolves every
// op's kernel and every var's tensor, and works out when each temporary is
// last used; Run() then only allocates outputs, calls kernels and frees
// temporaries after their last reader. The Program and the Scope must
// outlive the executor.
#ifndef LOOM_EXECUTOR_SERIAL_EXECUTOR_H_
#define LOOM_EXECUTOR_SERIAL_EXECUTOR_H_

#include <memory>
#include <string>
#include <vector>

#include "executor/device.h"
#include "executor/fp32_shim.h"
#include "executor/kernel.h"
#include "executor/scope.h"
#include "framework/program.h"

namespace loom {

struct SerialExecutorOptions {
  // Temporaries to keep after the run (the values the caller fetches).
  std::vector<std::string> fetch;
  // Free each temporary after its last reader; off, every value survives
  // the run (tests inspect intermediates this way).
  bool free_temporaries = true;
  // Where the ops run; not owned. nullptr: the host, with the CPU kernels.
  // On a device, Run() only issues the work on `stream`; the caller
  // synchronizes it, and the scope's inputs must be in the device's memory.
  Device* device = nullptr;
  Stream* stream = nullptr;
};

class SerialExecutor {
 public:
  static StatusOr<std::unique_ptr<SerialExecutor>> Create(
      const Program& program, Scope* scope,
      SerialExecutorOptions options = {});

  // Data vars must be set in the scope, with their declared meta; persistable
  // vars that are read before written must be initialized. `run` is what
  // kernels learn of the step (the serial trainer's whole batch starts at
  // row 0).
  Status Run(const RunInfo& run = RunInfo());

  size_t num_instructions() const { return instructions_.size(); }

 private:
  struct Instruction {
    const Op* op;
    KernelFn kernel;
    std::vector<BoundSlot> inputs;
    std::vector<BoundSlot> outputs;
    std::vector<std::pair<Tensor*, TensorMeta>> allocs;
    std::vector<Tensor*> frees;
    // Set where an fp32-only kernel meets bf16/fp16 tensors.
    std::unique_ptr<Fp32Shim> shim;
  };
  struct RequiredInput {
    std::string name;
    Tensor* tensor;
    TensorMeta meta;
    bool is_data;
  };
  explicit SerialExecutor(const SerialExecutorOptions& options)
      : device_(options.device), stream_(options.stream) {}
  Device* device_;
  Stream* stream_;

  std::vector<Instruction> instructions_;
  std::vector<RequiredInput> required_;
};

}  // namespace loom

#endif  // LOOM_EXECUTOR_SERIAL_EXECUTOR_H_
