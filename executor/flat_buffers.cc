#include "executor/flat_buffers.h"

#include <algorithm>
#include <cstring>

namespace loom {

namespace {

// The rank's part of a temporary buffer (ZeRO-3: gathers make the whole
// each time it is used) is a tensor of its own. The first time, it takes
// its elements from the members the startup program initialized, which
// are then let go: the rank holds 1/N of the parameters from here on.
Status BindGatheredShard(const Block& block, const std::string& name, const proto::VarDesc& var,
                         const proto::VarDesc& buffer,
                         Scope* scope, const std::function<int(int ring)>& ring_index) {
  Tensor* shard = scope->Var(name);
  if (shard->initialized()) return Status::OK();
  const TensorMeta meta = MetaOf(var);
  const int64_t numel = NumElements(meta.shape);
  const int index = ring_index ? ring_index(var.flat().shard_ring()) : -1;
  if (index < 0 || numel == 0 || (index + 1) * numel > buffer.shape(0)) {
    return InvalidArgument("var '", name, "' is a shard of gathered buffer '", buffer.name(),
                           "' over ring ", var.flat().shard_ring(), ", but this rank's place ",
                           "there is ", index);
  }
  shard->Resize(meta);
  std::memset(shard->raw_data(), 0, shard->bytes());
  const int64_t lo = index * numel, hi = lo + numel;
  const size_t size = SizeOf(meta.dtype);
  for (const auto& [member, m] : block.vars()) {
    if (!m.has_flat() || m.flat().buffer() != buffer.name() || m.flat().shard_ring() >= 0) {
      continue;
    }
    Tensor* held = scope->FindLocal(member);
    if (held == nullptr || !held->initialized()) continue;
    if (held->meta() != MetaOf(m)) {
      return InvalidArgument("var '", member, "' holds ", MetaToString(held->meta()),
                             " but is declared ", MetaToString(MetaOf(m)), " in gathered buffer '",
                             buffer.name(), "'");
    }
    const int64_t begin = std::max(lo, m.flat().offset());
    const int64_t end = std::min(hi, m.flat().offset() + held->numel());
    if (end > begin) {
      std::memcpy(static_cast<uint8_t*>(shard->raw_data()) + (begin - lo) * size,
                  static_cast<const uint8_t*>(held->raw_data()) +
                      (begin - m.flat().offset()) * size,
                  (end - begin) * size);
    }
    held->Free();
  }
  return Status::OK();
}

}  // namespace

Status BindFlatBuffers(const Block& block, Scope* scope,
                       const std::function<int(int ring)>& ring_index) {
  for (const auto& [name, var] : block.vars()) {
    if (!var.has_flat()) continue;
    const proto::VarDesc* buffer_desc = block.FindVar(var.flat().buffer());
    if (buffer_desc == nullptr) {
      return NotFound("var '", name, "' lives in flat buffer '", var.flat().buffer(),
                      "', which the program does not declare");
    }
    if (!buffer_desc->persistable()) {
      if (var.flat().shard_ring() >= 0) {
        LOOM_RETURN_IF_ERROR(BindGatheredShard(block, name, var, *buffer_desc, scope, ring_index));
      }
      continue;  // the members are views a flat_split makes each time
    }
    Tensor* buffer = scope->Var(buffer_desc->name());
    if (!buffer->initialized()) {
      buffer->Resize(MetaOf(*buffer_desc));
      std::memset(buffer->raw_data(), 0, buffer->bytes());
    }
    const TensorMeta meta = MetaOf(var);
    int64_t offset = var.flat().offset();
    if (var.flat().shard_ring() >= 0) {
      const int index = ring_index ? ring_index(var.flat().shard_ring()) : -1;
      const int64_t numel = NumElements(meta.shape);
      if (index < 0 || numel == 0 || (index + 1) * numel > buffer->numel()) {
        return InvalidArgument("var '", name, "' is a shard of flat buffer '",
                               buffer_desc->name(), "' over ring ", var.flat().shard_ring(),
                               ", but this rank's place there is ", index, " and the buffer ",
                               "holds ", numel == 0 ? 0 : buffer->numel() / numel, " shards");
      }
      offset = index * numel;
    }
    Tensor view = buffer->View(offset, meta.shape);
    Tensor* member = scope->Var(name);
    if (member->initialized() && member->raw_data() == view.raw_data()) continue;
    if (member->initialized()) {
      if (member->meta() != meta) {
        return InvalidArgument("var '", name, "' holds ", MetaToString(member->meta()),
                               " but is declared ", MetaToString(meta), " in flat buffer '",
                               buffer_desc->name(), "'");
      }
      std::memcpy(view.raw_data(), member->raw_data(), view.bytes());
    }
    member->ShareDataWith(view);
  }
  return Status::OK();
}

}  // namespace loom
