// The default size of a gradient bucket: big enough that its collective
// runs near the link's bandwidth, small enough that the last bucket, which
// nothing after it hides, carries only a share of the communication.
//
// On the α-β model a call of B bytes costs a + b·B, of which b·B is moving
// bytes; its efficiency b·B / (a + b·B) reaches e at B = e/(1-e) · a/b. The
// a and b are read off the cluster's model for the collective and group at
// hand (its link level, a collective's own costs, the algorithm's factors),
// so nothing here is a rate. A user's explicit size bypasses all of it.
#ifndef LOOM_COST_MODEL_BUCKET_SIZE_H_
#define LOOM_COST_MODEL_BUCKET_SIZE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cost_model/comm_model.h"

namespace loom {

struct BucketSizeChoice {
  int64_t bytes = 0;            // the bucket size chosen
  int64_t efficient_bytes = 0;  // the smallest size reaching the target efficiency
  int64_t total_bytes = 0;      // every gradient the buckets hold
  double latency_s = 0;         // a: the call's cost at zero bytes
  double seconds_per_byte = 0;  // b
  double efficiency = 0;        // the target
  int min_buckets = 0;
  // "... 25.2 MB: 90% of the link's bandwidth at 3.1 MB ..." for --explain.
  std::string Explain() const;
};

// The smallest bucket whose `kind` call over `group_ranks` reaches
// `efficiency` (0 < e < 1) of the link's bandwidth, at most total_bytes /
// min_buckets so that the last bucket holds at most that share, and at
// least one byte. A group of one member (or an infinitely fast link) takes
// total_bytes / min_buckets.
StatusOr<BucketSizeChoice> ChooseBucketBytes(const CommModel& comm, CommCall kind,
                                             CommAlgorithm algorithm,
                                             const std::vector<int>& group_ranks,
                                             int64_t total_bytes, double efficiency = 0.9,
                                             int min_buckets = 4);

}  // namespace loom

#endif  // LOOM_COST_MODEL_BUCKET_SIZE_H_
