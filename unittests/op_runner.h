// Runs a single op for a test: declares each fed input as a data var,
// appends the op with shape inference, and runs it with the serial executor.
#ifndef LOOM_UNITTESTS_OP_RUNNER_H_
#define LOOM_UNITTESTS_OP_RUNNER_H_

#include <map>
#include <string>
#include <vector>

#include "executor/tensor.h"
#include "framework/framework.pb.h"
#include "framework/status.h"

namespace loom {
namespace testing {

// The fetched outputs, or the first error (shape inference, executor
// creation or the run itself).
StatusOr<std::map<std::string, Tensor>> TryRunOp(
    const proto::OpDesc& desc, const std::map<std::string, Tensor>& inputs,
    const std::vector<std::string>& fetch);
StatusOr<Tensor> TryRunOne(const proto::OpDesc& desc,
                           const std::map<std::string, Tensor>& inputs,
                           const std::string& output);

// The status of appending `desc`, with shape inference, to a block that
// declares `vars`: for tests of shape errors.
Status AppendStatus(const proto::OpDesc& desc,
                    const std::map<std::string, TensorMeta>& vars);

// The same for tests of values: any error fails the process with its message.
std::map<std::string, Tensor> RunOp(const proto::OpDesc& desc,
                                    const std::map<std::string, Tensor>& inputs,
                                    const std::vector<std::string>& fetch);
Tensor RunOne(const proto::OpDesc& desc,
              const std::map<std::string, Tensor>& inputs,
              const std::string& output);

}  // namespace testing
}  // namespace loom

#endif  // LOOM_UNITTESTS_OP_RUNNER_H_
