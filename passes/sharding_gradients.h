// The gradient side of the sharding pass (ZeRO stages 1 and 2): where each
// data-parallel bucket's gradients are reduce-scattered, and what of them
// persists on a rank.
#ifndef LOOM_PASSES_SHARDING_GRADIENTS_H_
#define LOOM_PASSES_SHARDING_GRADIENTS_H_

#include <string>
#include <vector>

#include "passes/pass.h"
#include "scheduler/layout.h"

namespace loom {

// A data-parallel bucket as the sharding pass finds it: its all-reduce,
// its flat gradient buffer and members, their parameters and updates.
struct ShardingBucket {
  Op* allreduce = nullptr;
  std::string grad_buffer;
  std::vector<std::string> grads;
  std::vector<std::string> params;
  std::vector<Op*> updates;  // each parameter's update op, in program order
  // The bucket all-reduce's wire dtype (framework/wire_dtype.h), which the
  // collectives replacing it keep; "" for none.
  std::string wire_dtype;
};

// The ranks sharing a bucket's state: `n` of them on `ring` (the dp ring,
// or kShardingRing under hybrid sharding).
struct ShardGroup {
  int n = 1;
  RingId ring = kDpRing;
};

// Stage 1 (and a tied bucket under stage 2): the gradients stay in their
// persistent buffer, reduce-scattered (averaged) in place into the rank's
// part of it, `shard` elements, in the bucket all-reduce's place, which
// goes. Returns the part's var (G@SHARD).
StatusOr<std::string> ReduceScatterInPlace(PassContext& ctx, const ShardingBucket& b,
                                           const ShardGroup& group, int64_t shard);

// Stage 2: the bucket's gradients are a temporary, joined in place each
// micro-batch (flat_concat, with a zero tail to `padded` elements) and
// reduce-scattered at once; only the rank's part persists, summed over the
// micro-batches where gradients accumulate. The full-size accumulators go
// (their names into `gone`); the ops that must follow the update (zeroing
// the summed part) into `after_update`. Returns the part's var (G@SHARD).
StatusOr<std::string> ScatterGradients(PassContext& ctx, const ShardingBucket& b,
                                       const ShardGroup& group, int64_t padded, int64_t shard,
                                       std::vector<proto::OpDesc>* after_update,
                                       std::vector<std::string>* gone);

}  // namespace loom

#endif  // LOOM_PASSES_SHARDING_GRADIENTS_H_
