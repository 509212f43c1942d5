#include "scheduler/layout.h"

namespace loom {

const char* RingName(RingId ring) {
  switch (ring) {
    case kMpRing:
      return "mp";
    case kDpRing:
      return "dp";
    case kPpRing:
      return "pp";
    case kSharedParamRing:
      return "shared_param";
    case kShardingRing:
      return "sharding";
    case kDpReplicaRing:
      return "dp_replica";
    case kPpGradRing:
      return "pp_grad";
  }
  return "unknown";
}

std::string CoordsToString(const RankCoords& c) {
  return StrCat("dp=", c.dp, " mp=", c.mp, " pp=", c.pp);
}

std::vector<int> RingMembers(const ParallelLayout& layout, int rank,
                             RingId ring) {
  const RankCoords c = layout.Coords(rank);
  std::vector<int> members;
  switch (ring) {
    case kMpRing:
      for (int m = 0; m < layout.mp; ++m) {
        members.push_back(layout.Rank(RankCoords{c.dp, m, c.pp}));
      }
      break;
    case kDpRing:
      for (int d = 0; d < layout.dp; ++d) {
        members.push_back(layout.Rank(RankCoords{d, c.mp, c.pp}));
      }
      break;
    case kPpRing:
    case kPpGradRing:
      if (ring == kPpGradRing && (!layout.v_shape || layout.pp == 1)) break;
      for (int s = 0; s < layout.pp; ++s) {
        members.push_back(layout.RankAtStage(c, s));
      }
      break;
    case kSharedParamRing:
      if (layout.pp > 1 && (c.pp == 0 || c.pp == layout.pp - 1)) {
        members = {layout.RankAtStage(c, 0),
                   layout.RankAtStage(c, layout.pp - 1)};
      }
      break;
    case kShardingRing:
    case kDpReplicaRing:
      if (layout.sharding > 0) {
        const int n = layout.sharding;
        for (int d = 0; d < layout.dp; ++d) {
          const bool same = ring == kShardingRing ? d / n == c.dp / n : d % n == c.dp % n;
          if (same) members.push_back(layout.Rank(RankCoords{d, c.mp, c.pp}));
        }
      }
      break;
  }
  return members;
}

}  // namespace loom
