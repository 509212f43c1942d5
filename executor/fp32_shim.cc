#include "executor/fp32_shim.h"

#include "framework/low_precision.h"
#include "framework/shape_inference.h"

namespace loom {
namespace {

bool IsLowPrecisionVar(const Block& block, const std::string& name) {
  const proto::VarDesc* var = block.FindVar(name);
  return var != nullptr && IsLowPrecision(MetaOf(*var).dtype);
}

}  // namespace

StatusOr<std::unique_ptr<Fp32Shim>> Fp32Shim::For(DeviceType device, const Op& op,
                                                  const std::vector<BoundSlot>& inputs,
                                                  const std::vector<BoundSlot>& outputs) {
  if (KernelRegistry::For(device).LowPrecisionOf(op.type()) == LowPrecision::kNative) {
    return std::unique_ptr<Fp32Shim>();
  }
  const Block& block = *op.block();
  std::string low;  // a bf16 or fp16 var of the op, for the error
  for (const std::string& v : op.InputVars()) {
    if (low.empty() && IsLowPrecisionVar(block, v)) low = v;
  }
  for (const std::string& v : op.OutputVars()) {
    if (low.empty() && IsLowPrecisionVar(block, v)) low = v;
  }
  if (low.empty()) return std::unique_ptr<Fp32Shim>();
  if (device != DeviceType::kCpu) {
    return Unimplemented(op.Location(), ": its ", DeviceTypeName(device), " kernel is fp32 only, "
                         "but '", low, "' is ", DataTypeName(MetaOf(*block.FindVar(low)).dtype));
  }

  const OpSchema* schema = OpRegistry::Global().Find(op.type());
  std::unique_ptr<Fp32Shim> shim(new Fp32Shim());
  const proto::OpDesc& desc = op.desc();
  shim->inputs_ = inputs;
  for (size_t s = 0; s < inputs.size(); ++s) {
    // A read of the meta alone (add_grad's X) needs no copy of the data.
    if (!ReadsInputData(schema, op, inputs[s].name)) continue;
    for (size_t i = 0; i < inputs[s].tensors.size(); ++i) {
      Tensor* real = inputs[s].tensors[i];
      if (real == nullptr || !IsLowPrecisionVar(block, desc.inputs(s).vars(i))) continue;
      Tensor* copy = shim->ShadowOf(real);
      shim->inputs_[s].tensors[i] = copy;
      shim->widen_.emplace_back(real, copy);
    }
  }
  shim->outputs_ = outputs;
  for (size_t s = 0; s < outputs.size(); ++s) {
    for (size_t i = 0; i < outputs[s].tensors.size(); ++i) {
      Tensor* real = outputs[s].tensors[i];
      if (real == nullptr || !IsLowPrecisionVar(block, desc.outputs(s).vars(i))) continue;
      Tensor* copy = shim->ShadowOf(real);
      shim->outputs_[s].tensors[i] = copy;
      shim->narrow_.emplace_back(real, copy);
    }
  }
  return shim;
}

Tensor* Fp32Shim::ShadowOf(Tensor* real) {
  for (auto& [r, copy] : shadows_) {
    if (r == real) return &copy;
  }
  shadows_.emplace_back(real, Tensor());
  return &shadows_.back().second;
}

Status Fp32Shim::Run(KernelFn kernel, const proto::OpDesc& desc, const RunInfo& run,
                     Device* device, Stream* stream) {
  for (auto& [real, copy] : widen_) {
    if (!real->initialized()) {
      return FailedPrecondition("input of ", DataTypeName(real->dtype()), " ",
                                ShapeToString(real->shape()), " holds no data");
    }
    copy->Resize(TensorMeta{proto::FP32, real->shape()});
    WidenToFloat(real->dtype(), real->raw_data(), real->numel(), copy->data<float>());
  }
  for (auto& [real, copy] : narrow_) {
    if (!copy->initialized()) copy->Resize(TensorMeta{proto::FP32, real->shape()});
  }
  Status s = kernel(KernelContext(desc, inputs_, outputs_, run, device, stream));
  if (s.ok()) {
    for (auto& [real, copy] : narrow_) {
      NarrowFromFloat(real->dtype(), copy->data<float>(), real->numel(), real->raw_data());
    }
  }
  for (auto& [real, copy] : shadows_) copy.Free();
  return s;
}

}  // namespace loom
