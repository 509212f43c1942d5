#include "passes/dropout_shard.h"

#include <vector>

#include "framework/shape_inference.h"

namespace loom {

StatusOr<bool> PlaceDropoutShard(const Block& block, Op* op, const Shape& before,
                                 int64_t degree, int rank) {
  const std::string& x = op->Input("X");
  const Shape after = MetaOf(*block.FindVar(x)).shape;
  if (after == before) return false;
  if (after.size() != before.size() || after.empty() || after[0] != before[0]) {
    return InvalidArgument(op->Location(), ": X ", x, " went from ", ShapeToString(before),
                           " to ", ShapeToString(after),
                           " under the split; a dropout's mask can follow a split of its "
                           "dims past the batch (dim 0) only");
  }
  auto full = op->GetAttr<std::vector<int64_t>>("full_shape");
  auto offsets = op->GetAttr<std::vector<int64_t>>("shard_offsets");
  if (full.empty()) full.assign(before.begin() + 1, before.end());
  if (offsets.empty()) offsets.assign(full.size(), 0);
  for (size_t d = 1; d < after.size(); ++d) {
    if (after[d] == before[d]) continue;
    // Megatron's splits give rank r the r-th contiguous 1/degree of a dim
    // (whole heads, or a run of positions, in order): its shard starts there.
    if (after[d] * degree != before[d]) {
      return InvalidArgument(op->Location(), ": X ", x, " dim ", d, " went from ", before[d],
                             " to ", after[d], " under mp.degree ", degree,
                             "; a dropout's input must be split into equal parts to place "
                             "its mask");
    }
    offsets[d - 1] += rank * after[d];
  }
  op->SetAttr("full_shape", full);
  op->SetAttr("shard_offsets", offsets);
  return true;
}

}  // namespace loom
