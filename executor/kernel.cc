#include "executor/kernel.h"

#include <algorithm>

namespace loom {

const BoundSlot* KernelContext::Find(const std::vector<BoundSlot>& slots,
                                     const std::string& name) const {
  for (const auto& s : slots) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

int KernelContext::InputCount(const std::string& slot) const {
  const BoundSlot* s = Find(inputs_, slot);
  return s == nullptr ? 0 : static_cast<int>(s->tensors.size());
}

bool KernelContext::HasInput(const std::string& slot) const {
  const BoundSlot* s = Find(inputs_, slot);
  return s != nullptr && !s->tensors.empty() && s->tensors[0] != nullptr;
}

const Tensor& KernelContext::Input(const std::string& slot, int i) const {
  const BoundSlot* s = Find(inputs_, slot);
  CHECK(s != nullptr && i < static_cast<int>(s->tensors.size()) &&
        s->tensors[i] != nullptr)
      << type() << ": input " << slot << "[" << i << "] is absent";
  return *s->tensors[i];
}

int KernelContext::OutputCount(const std::string& slot) const {
  const BoundSlot* s = Find(outputs_, slot);
  return s == nullptr ? 0 : static_cast<int>(s->tensors.size());
}

bool KernelContext::HasOutput(const std::string& slot, int i) const {
  const BoundSlot* s = Find(outputs_, slot);
  return s != nullptr && i < static_cast<int>(s->tensors.size()) &&
         s->tensors[i] != nullptr;
}

Tensor* KernelContext::Output(const std::string& slot, int i) const {
  CHECK(HasOutput(slot, i)) << type() << ": output " << slot << "[" << i
                            << "] is absent";
  return Find(outputs_, slot)->tensors[i];
}

KernelRegistry& KernelRegistry::Cpu() {
  static KernelRegistry* const registry = new KernelRegistry();
  return *registry;
}

KernelRegistry& KernelRegistry::Cuda() {
  static KernelRegistry* const registry = new KernelRegistry();
  return *registry;
}

KernelRegistry& KernelRegistry::For(DeviceType type) {
  return type == DeviceType::kCuda ? Cuda() : Cpu();
}

#ifndef LOOM_WITH_CUDA
// Without the CUDA backend the CUDA registry stays empty.
void RegisterAllCudaKernels() {}
#endif

void KernelRegistry::Register(const std::string& type, KernelFn fn,
                              LowPrecision low_precision) {
  CHECK(kernels_.count(type) == 0) << "kernel " << type << " registered twice";
  kernels_[type] = Entry{fn, low_precision};
}

KernelFn KernelRegistry::Find(const std::string& type) const {
  auto it = kernels_.find(type);
  return it == kernels_.end() ? nullptr : it->second.fn;
}

LowPrecision KernelRegistry::LowPrecisionOf(const std::string& type) const {
  auto it = kernels_.find(type);
  return it == kernels_.end() ? LowPrecision::kWidened : it->second.low_precision;
}

std::vector<std::string> KernelRegistry::Types() const {
  std::vector<std::string> out;
  for (const auto& [type, entry] : kernels_) out.push_back(type);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace loom
