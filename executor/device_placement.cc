#include "executor/device_placement.h"

#include <algorithm>
#include <map>

#include "executor/cpu/cpu_device.h"

namespace loom {
namespace {

// The tensors of `scope` sharing one buffer, and the bytes of it they span.
struct Buffer {
  std::shared_ptr<void> storage;
  int64_t span = 0;
  std::vector<std::pair<std::string, Tensor*>> tensors;
};

// `scope`'s own tensors holding data on `type`, grouped by buffer, in the
// order of their first tensor's name (so that copies run in a fixed order).
std::vector<Buffer> BuffersOn(const Scope& scope, DeviceType type) {
  std::vector<Buffer> buffers;
  std::map<const void*, size_t> index;
  for (const std::string& name : scope.LocalNames()) {
    Tensor* t = scope.FindLocal(name);
    if (!t->initialized() || t->device_type() != type) continue;
    auto [it, fresh] = index.emplace(t->storage().get(), buffers.size());
    if (fresh) buffers.push_back(Buffer{t->storage(), 0, {}});
    Buffer& b = buffers[it->second];
    b.span = std::max(b.span, t->byte_offset() + t->bytes());
    b.tensors.emplace_back(name, t);
  }
  return buffers;
}

Status Finish(Stream* stream) {
  return stream != nullptr ? stream->Synchronize() : Status::OK();
}

}  // namespace

Status PlaceScopeOn(Scope* scope, Device* device, Stream* stream) {
  if (device->type() == DeviceType::kCpu) return Status::OK();
  // The host buffers stay referenced here until the copies are done.
  std::vector<Buffer> buffers = BuffersOn(*scope, DeviceType::kCpu);
  for (Buffer& b : buffers) {
    LOOM_ASSIGN_OR_RETURN(std::shared_ptr<void> memory, device->Allocate(b.span, stream));
    LOOM_RETURN_IF_ERROR(device->CopyFromHost(memory.get(), b.storage.get(), b.span, stream)
                             .WithContext(StrCat("placing '", b.tensors.front().first, "'")));
    for (auto& [name, t] : b.tensors) t->Rehome(memory, device->type());
  }
  return Finish(stream);
}

StatusOr<std::unique_ptr<Scope>> MirrorOnHost(const Scope& scope, Device* device, Stream* stream) {
  auto mirror = std::make_unique<Scope>();
  for (Buffer& b : BuffersOn(scope, device->type())) {
    std::shared_ptr<void> host = AllocateHostMemory(b.span);
    if (host == nullptr) {
      return ResourceExhausted("host: out of memory mirroring '", b.tensors.front().first,
                               "' (", b.span, " bytes)");
    }
    LOOM_RETURN_IF_ERROR(device->CopyToHost(host.get(), b.storage.get(), b.span, stream));
    for (auto& [name, t] : b.tensors) {
      Tensor* m = mirror->Var(name);
      *m = *t;
      m->Rehome(host, DeviceType::kCpu);
    }
  }
  LOOM_RETURN_IF_ERROR(Finish(stream));
  return mirror;
}

Status CopyMirrorBack(const Scope& mirror, Scope* scope, Device* device, Stream* stream) {
  for (Buffer& b : BuffersOn(*scope, device->type())) {
    const void* host = nullptr;
    for (auto& [name, t] : b.tensors) {
      const Tensor* m = mirror.FindLocal(name);
      if (m == nullptr || !m->initialized() || m->meta() != t->meta() ||
          m->byte_offset() != t->byte_offset() ||
          (host != nullptr && m->storage().get() != host)) {
        return Internal("'", name, "' no longer matches its host mirror");
      }
      host = m->storage().get();
    }
    LOOM_RETURN_IF_ERROR(device->CopyFromHost(b.storage.get(), host, b.span, stream));
  }
  return Finish(stream);
}

Status CopyToDevice(const Tensor& host, Tensor* dst, Device* device, Stream* stream) {
  LOOM_RETURN_IF_ERROR(dst->Resize(host.meta(), device, stream));
  return device->CopyFromHost(dst->raw_data(), host.raw_data(), host.bytes(), stream);
}

StatusOr<Tensor> CopyToHostTensor(const Tensor& t, Device* device, Stream* stream) {
  Tensor out(t.meta());
  if (t.device_type() == DeviceType::kCpu) {
    out.CopyFrom(t);
    return out;
  }
  LOOM_RETURN_IF_ERROR(device->CopyToHost(out.raw_data(), t.raw_data(), t.bytes(), stream));
  return out;
}

}  // namespace loom
