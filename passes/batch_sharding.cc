// Shrinking the batch dim: data parallelism splits the batch over ranks,
// gradient accumulation over micro-batches; both divide the same dim.
#include "framework/shape_inference.h"
#include "passes/parallel_passes.h"

namespace loom {

Status ShardBatchDim(Block& block, int64_t parts, const char* field) {
  for (const auto& [name, var] : block.vars()) {
    if (!var.is_data()) continue;
    if (var.shape_size() == 0 || var.shape(0) % parts != 0) {
      return InvalidArgument(field, " (", parts, ") does not divide the batch dim of data var ",
                             name, " ", ShapeToString(MetaOf(var).shape));
    }
  }
  for (const auto& [name, var] : block.vars()) {
    if (var.is_data()) block.FindVar(name)->set_shape(0, var.shape(0) / parts);
  }
  // A recv's shape is an attribute, not inferred from its peer. What crosses
  // a pipeline cut is an activation or its gradient, batch-major like the
  // data it came from, so its dim 0 shrinks the same way.
  for (Op* op : block.ops()) {
    if (op->type() != "recv") continue;
    auto shape = op->GetAttr<std::vector<int64_t>>("out_shape");
    if (shape.empty() || shape[0] % parts != 0) {
      return InvalidArgument(field, " (", parts, ") does not divide dim 0 of ",
                             op->Output("Out"), " ", ShapeToString(shape),
                             ", received by ", op->Location());
    }
    shape[0] /= parts;
    op->SetAttr("out_shape", shape);
  }
  return ReinferShapes(block);
}

}  // namespace loom
