// Where a dropout's shard of a split tensor lies in the whole tensor.
//
// Dropout draws its mask from (seed, step, element of the full tensor), so
// a rank that holds a contiguous part of X must say which part to draw the
// same bits the unsplit program draws there. Tensor parallelism splits
// attention probabilities by head; sequence parallelism splits the
// residual stream along the sequence.
#ifndef LOOM_PASSES_DROPOUT_SHARD_H_
#define LOOM_PASSES_DROPOUT_SHARD_H_

#include "framework/program.h"
#include "framework/status.h"
#include "framework/types.h"

namespace loom {

// `op` (a dropout) read X of shape `before` ahead of a split into `degree`
// equal contiguous parts of which this rank holds part `rank`; X now has
// its split shape. Records the shard's place in the full tensor on the op
// (full_shape, shard_offsets), composing with a split recorded before.
// Returns whether X was split. Dims past the batch (dim 0) only.
StatusOr<bool> PlaceDropoutShard(const Block& block, Op* op, const Shape& before,
                                 int64_t degree, int rank);

}  // namespace loom

#endif  // LOOM_PASSES_DROPOUT_SHARD_H_
