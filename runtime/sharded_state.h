// Optimizer state that ZeRO stage 1 shards (passes/sharding_pass.cc) as a
// checkpoint holds it: per parameter and whole, as an unsharded run would
// save it, so that a checkpoint moves between sharded and unsharded runs
// and any layout.
//
// On a rank, a bucket's state is one var per kind ("dp.bucket3.moment1"):
// the rank's 1/dp part of the bucket laid out as the bucket's parameters
// are in their flat buffer, or one value for all (a beta power).
#ifndef LOOM_RUNTIME_SHARDED_STATE_H_
#define LOOM_RUNTIME_SHARDED_STATE_H_

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "executor/tensor.h"
#include "framework/program.h"
#include "framework/status.h"

namespace loom {

struct ShardedBucket {
  struct Member {
    std::string param;
    int64_t offset = 0;  // in the bucket, elements
    Shape shape;         // as the rank holds the parameter
  };
  std::vector<Member> members;
  int64_t shard = 0;  // elements each dp rank holds
  struct StateVar {
    std::string suffix;      // per-parameter state is param + suffix
    bool split = false;      // a 1/dp part of the bucket (else one value)
    bool parameter = false;  // the parameters themselves (ZeRO-3), suffix ""
  };
  std::map<std::string, StateVar> state;  // bucket state var -> what it holds
};

// The sharded buckets the updates of a rank's programs keep (none without
// sharding); the members come from whichever program declares them.
std::vector<ShardedBucket> ShardedBucketsOf(const std::vector<const Block*>& blocks);

// Whether the bucket holds its parameters' only copy (ZeRO-3): then the
// members' own vars hold nothing between steps.
bool HoldsParameters(const ShardedBucket& bucket);

// Per-parameter state, `param + suffix`, from the bucket state of every dp
// rank of one (pp, mp) position: `parts[v][d]` is dp rank d's tensor of
// bucket state var v. Adds them to `out`, and the parameters of a ZeRO-3
// bucket to `params`.
Status UnshardBucket(const ShardedBucket& bucket,
                     const std::map<std::string, std::vector<const Tensor*>>& parts,
                     std::map<std::string, Tensor>* out, std::map<std::string, Tensor>* params);

// The inverse for dp rank `dp_rank`: fills each bucket state var's tensor
// in `held` from the full per-parameter state in `state` (the parameters
// of a ZeRO-3 bucket from `params`), of which
// `mp_shard(param, full)` gives this rank's tensor-parallel shard, and adds
// the names it read to `used`. An error names what `source` lacks.
Status ShardIntoBucket(const ShardedBucket& bucket, int dp_rank,
                       const std::map<std::string, Tensor>& state,
                       const std::map<std::string, Tensor>& params,
                       const std::function<StatusOr<Tensor>(const std::string& name,
                                                            const Tensor& full)>& mp_shard,
                       const std::map<std::string, Tensor*>& held, const std::string& source,
                       std::set<std::string>* used);

}  // namespace loom

#endif  // LOOM_RUNTIME_SHARDED_STATE_H_
