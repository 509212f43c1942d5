#include "executor/flat_buffers.h"

#include <cstring>

namespace loom {

Status BindFlatBuffers(const Block& block, Scope* scope,
                       const std::function<int(int ring)>& ring_index) {
  for (const auto& [name, var] : block.vars()) {
    if (!var.has_flat()) continue;
    const proto::VarDesc* buffer_desc = block.FindVar(var.flat().buffer());
    if (buffer_desc == nullptr) {
      return NotFound("var '", name, "' lives in flat buffer '", var.flat().buffer(),
                      "', which the program does not declare");
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
