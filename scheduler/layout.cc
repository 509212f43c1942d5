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
  }
  return "unknown";
}

std::string CoordsToString(const RankCoords& c) {
  return StrCat("dp=", c.dp, " mp=", c.mp, " pp=", c.pp);
}

}  // namespace loom
