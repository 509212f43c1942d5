// Where a rank sits in the dp x mp x pp grid. Tensor-parallel ranks vary
// fastest and pipeline stages slowest (Megatron's order), so that a
// tensor-parallel group is a run of neighbouring ranks.
#ifndef LOOM_SCHEDULER_LAYOUT_H_
#define LOOM_SCHEDULER_LAYOUT_H_

#include <string>
#include <vector>

#include "framework/status.h"

namespace loom {

// The ring_id attribute of a communication op names the kind of group it
// runs in; the executor turns it into the concrete group from the rank's
// coordinates.
enum RingId : int {
  kMpRing = 1,           // ranks that differ only in mp
  kDpRing = 2,           // ranks that differ only in dp
  kPpRing = 3,           // ranks that differ only in pp (send/recv peers)
  kSharedParamRing = 4,  // the stages sharing a tied parameter
  kShardingRing = 5,     // hybrid sharding: the dp ranks sharing one state
  kDpReplicaRing = 6,    // hybrid sharding: the ranks holding the same part
  kPpGradRing = 7,       // kPpRing's ranks: gradients sent apart (ZBV)
};

// Arrays indexed by RingId have this size (index 0 is unused).
inline constexpr int kNumRingIds = 8;
inline constexpr RingId kAllRings[] = {kMpRing,        kDpRing,        kPpRing,    kSharedParamRing,
                                       kShardingRing, kDpReplicaRing, kPpGradRing};

// "mp", "dp", "pp", "shared_param", "sharding", "dp_replica", "pp_grad";
// "unknown" for a value outside RingId.
const char* RingName(RingId ring);

struct RankCoords {
  int dp = 0;
  int mp = 0;
  int pp = 0;
  bool operator==(const RankCoords& o) const {
    return dp == o.dp && mp == o.mp && pp == o.pp;
  }
};

struct ParallelLayout {
  int dp = 1;
  int mp = 1;
  int pp = 1;
  // Hybrid sharding: ZeRO state shared by groups of this many consecutive
  // dp ranks and replicated across the groups; 0 when it is not split
  // (no sharding, or sharding over the whole dp group).
  int sharding = 0;
  // The pipeline's chunks sit in a V (ZBV, PlaceVirtualStage): the last
  // virtual stage, the loss's, is on stage 0, and the backward's gradients
  // cross on kPpGradRing and streams of their own. Under a V one link
  // carries a stage's activations down and its other chunk's gradients, in
  // orders the two ends run differently; in one sequence a send would wait
  // for a recv its peer posts only after a transfer queued behind that
  // send.
  bool v_shape = false;

  int world_size() const { return dp * mp * pp; }
  // The pipeline stage that computes the loss.
  int LossStage() const { return v_shape ? 0 : pp - 1; }
  RankCoords Coords(int rank) const {
    return RankCoords{(rank / mp) % dp, rank % mp, rank / (mp * dp)};
  }
  int Rank(const RankCoords& c) const { return c.mp + mp * (c.dp + dp * c.pp); }
  // The rank with `c`'s dp and mp coordinates at pipeline stage `stage`.
  int RankAtStage(const RankCoords& c, int stage) const {
    return Rank(RankCoords{c.dp, c.mp, stage});
  }
};

// "dp=1 mp=0 pp=3"
std::string CoordsToString(const RankCoords& c);

// The global ranks of `rank`'s group on `ring`, in group-rank order:
//   kMpRing          the ranks with its dp and pp, in mp order
//   kDpRing          the ranks with its mp and pp, in dp order
//   kPpRing          the ranks with its dp and mp, in pp order (group rank
//                    == pipeline stage)
//   kSharedParamRing the first and last stage with its dp and mp (group
//                    rank 0 is stage 0); only when pp > 1, and only for
//                    those two stages
//   kShardingRing    with layout.sharding: the dp group's ranks in its
//                    block of `sharding` consecutive dp ranks, in dp order
//   kDpReplicaRing   with layout.sharding: the dp group's ranks at its
//                    place in every block, in dp order
//   kPpGradRing      with layout.v_shape and pp > 1: kPpRing's ranks
// Empty when the rank has no such group. The one definition of group
// membership: communicators, lowering and the plan verifier all use it.
std::vector<int> RingMembers(const ParallelLayout& layout, int rank,
                             RingId ring);

}  // namespace loom

#endif  // LOOM_SCHEDULER_LAYOUT_H_
