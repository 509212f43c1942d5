#include "unittests/op_runner.h"

#include "executor/serial_executor.h"
#include "framework/shape_inference.h"

namespace loom {
namespace testing {

StatusOr<std::map<std::string, Tensor>> TryRunOp(
    const proto::OpDesc& desc, const std::map<std::string, Tensor>& inputs,
    const std::vector<std::string>& fetch) {
  RegisterAllCpuKernels();
  Program p;
  for (const auto& [name, t] : inputs) {
    proto::VarDesc* v = p.global_block().AddVar(name);
    SetMeta(t.meta(), v);
    v->set_is_data(true);
  }
  LOOM_RETURN_IF_ERROR(AppendOpInferShapes(p.global_block(), desc).status());
  Scope scope;
  for (const auto& [name, t] : inputs) scope.Var(name)->CopyFrom(t);
  LOOM_ASSIGN_OR_RETURN(auto exec,
                        SerialExecutor::Create(p, &scope, {fetch}));
  LOOM_RETURN_IF_ERROR(exec->Run());
  std::map<std::string, Tensor> out;
  for (const std::string& name : fetch) out[name].CopyFrom(*scope.Find(name));
  return out;
}

StatusOr<Tensor> TryRunOne(const proto::OpDesc& desc,
                           const std::map<std::string, Tensor>& inputs,
                           const std::string& output) {
  LOOM_ASSIGN_OR_RETURN(auto out, TryRunOp(desc, inputs, {output}));
  return out.at(output);
}

Status AppendStatus(const proto::OpDesc& desc,
                    const std::map<std::string, TensorMeta>& vars) {
  RegisterAllOps();
  Program p;
  for (const auto& [name, meta] : vars) SetMeta(meta, p.global_block().AddVar(name));
  return AppendOpInferShapes(p.global_block(), desc).status();
}

std::map<std::string, Tensor> RunOp(const proto::OpDesc& desc,
                                    const std::map<std::string, Tensor>& inputs,
                                    const std::vector<std::string>& fetch) {
  auto out = TryRunOp(desc, inputs, fetch);
  CHECK(out.ok()) << desc.type() << ": " << out.status();
  return std::move(out).value();
}

Tensor RunOne(const proto::OpDesc& desc,
              const std::map<std::string, Tensor>& inputs,
              const std::string& output) {
  return RunOp(desc, inputs, {output}).at(output);
}

}  // namespace testing
}  // namespace loom
