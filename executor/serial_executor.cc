#include "executor/serial_executor.h"

#include <unordered_map>
#include <unordered_set>

#include "framework/shape_inference.h"
#include "framework/verifier.h"

namespace loom {
namespace {

std::vector<BoundSlot> Bind(
    const google::protobuf::RepeatedPtrField<proto::OpDesc::Slot>& slots,
    const std::unordered_map<std::string, Tensor*>& tensors) {
  std::vector<BoundSlot> bound;
  for (const auto& slot : slots) {
    BoundSlot b{slot.name(), {}};
    for (const auto& v : slot.vars()) {
      b.tensors.push_back(v.empty() ? nullptr : tensors.at(v));
    }
    bound.push_back(std::move(b));
  }
  return bound;
}

}  // namespace

StatusOr<std::unique_ptr<SerialExecutor>> SerialExecutor::Create(
    const Program& program, Scope* scope, SerialExecutorOptions options) {
  RegisterAllCpuKernels();
  const DeviceType type = options.device != nullptr ? options.device->type() : DeviceType::kCpu;
  if (type == DeviceType::kCuda) RegisterAllCudaKernels();
  const Block& block = program.global_block();
  LOOM_RETURN_IF_ERROR(VerifyBlock(block));

  std::unordered_map<std::string, Tensor*> tensors;
  tensors.reserve(block.vars().size());
  for (const auto& [name, var] : block.vars()) {
    Tensor* t = scope->Find(name);
    tensors[name] = t != nullptr ? t : scope->Var(name);
  }

  std::unique_ptr<SerialExecutor> exec(new SerialExecutor(options));
  const std::unordered_set<std::string> keep(options.fetch.begin(),
                                             options.fetch.end());
  std::unordered_map<std::string, int> last_use;
  std::unordered_set<std::string> written;
  std::unordered_set<std::string> required;
  const OpRegistry& ops = OpRegistry::Global();
  int index = 0;
  for (Op* op : block.ops()) {
    KernelFn kernel = KernelRegistry::For(type).Find(op->type());
    if (kernel == nullptr) {
      return Unimplemented(op->Location(), ": no ", DeviceTypeName(type), " kernel");
    }
    Instruction instr{op, kernel, Bind(op->desc().inputs(), tensors),
                      Bind(op->desc().outputs(), tensors), {}, {}, nullptr};
    LOOM_ASSIGN_OR_RETURN(instr.shim, Fp32Shim::For(type, *op, instr.inputs, instr.outputs));
    const OpSchema* schema = ops.Find(op->type());
    for (const auto& slot : op->desc().inputs()) {
      const bool reads_data = ReadsInputData(schema, *op, slot.name());
      for (const auto& v : slot.vars()) {
        if (v.empty()) continue;
        if (!written.count(v) && !required.count(v)) {
          required.insert(v);
          const proto::VarDesc* var = block.FindVar(v);
          exec->required_.push_back(
              {v, tensors.at(v), MetaOf(*var), var->is_data()});
        }
        if (reads_data) last_use[v] = index;
      }
    }
    for (const std::string& v : op->OutputVars()) {
      instr.allocs.emplace_back(tensors.at(v), MetaOf(*block.FindVar(v)));
      written.insert(v);
      last_use[v] = index;
    }
    exec->instructions_.push_back(std::move(instr));
    ++index;
  }
  if (options.free_temporaries) {
    for (const auto& [name, at] : last_use) {
      const proto::VarDesc* var = block.FindVar(name);
      if (var->persistable() || var->is_data() || keep.count(name)) continue;
      exec->instructions_[at].frees.push_back(tensors.at(name));
    }
  }
  return exec;
}

Status SerialExecutor::Run(const RunInfo& run) {
  for (const RequiredInput& in : required_) {
    if (!in.tensor->initialized()) {
      return FailedPrecondition(
          in.is_data ? "data var '" : "persistable var '", in.name,
          in.is_data ? "' was not fed"
                     : "' is not initialized (run the startup program first)");
    }
    if (in.tensor->meta() != in.meta) {
      return InvalidArgument("var '", in.name, "' holds ",
                             MetaToString(in.tensor->meta()),
                             " but the program declares ",
                             MetaToString(in.meta));
    }
  }
  for (Instruction& instr : instructions_) {
    if (device_ == nullptr) {
      for (auto& [tensor, meta] : instr.allocs) tensor->Resize(meta);
    } else {
      for (auto& [tensor, meta] : instr.allocs) {
        LOOM_RETURN_IF_ERROR(
            tensor->Resize(meta, device_, stream_).WithContext(instr.op->Location()));
      }
    }
    Status s = instr.shim != nullptr
                   ? instr.shim->Run(instr.kernel, instr.op->desc(), run, device_, stream_)
                   : instr.kernel(KernelContext(instr.op->desc(), instr.inputs,
                                                instr.outputs, run, device_, stream_));
    if (!s.ok()) return s.WithContext(instr.op->Location());
    for (Tensor* t : instr.frees) t->Free();
  }
  return Status::OK();
}

}  // namespace loom
