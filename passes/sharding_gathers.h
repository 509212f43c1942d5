// ZeRO stage 3's parameter gathers, for the sharding pass: once a bucket's
// parameters live only as each rank's shard, every phase that reads them
// (a job's forward, and again its backward) gathers the bucket first and
// hands out its parameters as views.
#ifndef LOOM_PASSES_SHARDING_GATHERS_H_
#define LOOM_PASSES_SHARDING_GATHERS_H_

#include <optional>
#include <string>
#include <vector>

#include "passes/pass.h"
#include "scheduler/layout.h"

namespace loom {

// A bucket whose whole, `buffer`, is a temporary: its parameters (members
// placed in it by VarDesc.flat) are temporaries too, and `shard` (this
// rank's part) is all that persists.
struct GatheredBucket {
  std::string buffer;
  std::string shard;
  std::vector<std::string> params;
  // Fetched by DeepSpeed's all-reduce (the buffer zeroed, the rank's part
  // written in, then summed) instead of an all-gather (sharding.fetch_mode).
  bool by_all_reduce = false;
  // Kept whole for the step (sharding.keep_gathered_bytes) and gathered in
  // the compute dtype: gathered once a step, in the first micro-batch's
  // forward, into a persistable buffer that every micro-batch's forward
  // and backward read (Megatron's overlapped parameter gather).
  bool once = false;
  // The low dtype every reader casts the parameters to (LowGatherDtype),
  // which the bucket is gathered in; nullopt: gathered as it is.
  std::optional<DataType> low_dtype;
};

// Inserts, per phase (forward or backward, per VPP chunk) and bucket in the
// order the phase first reads them: an all-gather of the shard into the
// buffer (or the all-reduce fetch) on the sharding stream, then a
// flat_split handing out the parameters as views of it. The phase's backward reads parameters under
// names of their own (`w@REGATHER`), so that the forward's gathered buffer
// is freed after its last forward use and the backward gathers again;
// only the bucket the forward reads last and the backward first stays
// gathered from one to the other.
//
// Under AMP, a bucket whose every parameter is read only through casts to
// one low dtype (the weight matrices at O2) is gathered in that dtype, as
// DeepSpeed and FSDP gather bf16 weights: each gather casts the rank's
// shard first, and the flat_split hands out the casts' outputs
// (`w.cast_bf16`) in place of the parameters. Casting is elementwise, so
// the values are those the casts after an fp32 gather made, at half the
// bytes moved and held. In a bucket gathered in fp32 the backward casts
// its regathered copy again (`w.cast_bf16@RECAST`) rather than keep the
// forward's cast from one to the other.
//
// A bucket gathered `once` (it must be gathered in the compute dtype) has
// its gather ops flagged first_micro_batch_only, and its buffer and views
// persistable (VarDesc.cast_of: derived state, which checkpoints leave
// out); the backward reads the forward's views.
//
// A gather waits, by an event, until the phase has finished reading the
// bucket `depth` + 1 places before it (sharding.prefetch_depth): depth 0
// gathers a bucket once the previous one is done with, depth d keeps d
// gathers in flight ahead of the compute. The first depth + 1 of a phase
// start with it. The gathers run among the `nranks` ranks of `ring`.
// Errors name an optimizer op that reads a parameter, which
// under stage 3 exists only while forward and backward run.
// The low dtype a bucket of `params` is gathered in under AMP: the one
// that every reader of each of them casts it to; nullopt where any is read
// as it is (the bucket is then gathered in its own dtype).
std::optional<DataType> LowGatherDtype(const Block& block, const std::vector<std::string>& params);

Status InsertParameterGathers(PassContext& ctx, const std::vector<GatheredBucket>& buckets,
                              int nranks, RingId ring, int depth);

}  // namespace loom

#endif  // LOOM_PASSES_SHARDING_GATHERS_H_
