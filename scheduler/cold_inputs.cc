#include "scheduler/cold_inputs.h"

namespace loom {

std::vector<int64_t> ColdInputBytes(const RankGraphBody& body, int64_t cache_bytes) {
  std::vector<int64_t> cold(body.instructions.size(), 0);
  const int calc = body.FindStream("calc");
  if (cache_bytes <= 0 || calc < 0) return cold;
  // Activation bytes made so far, and that count at each temporary's last
  // touch (-1: not touched yet this step).
  int64_t made = 0;
  std::vector<int64_t> touched_at(body.temporaries.size(), -1);
  for (int id : body.streams[calc].queue) {
    const Instruction& ins = body.instructions[id];
    for (int k = 0; k < ins.uses_end() - ins.touches_begin; ++k) {
      const int t = body.touches[ins.touches_begin + k];
      const bool reads = k >= ins.allocs;
      if (reads && touched_at[t] >= 0 && made - touched_at[t] >= cache_bytes) {
        cold[id] += body.temporaries[t].bytes;
      }
    }
    for (int k = 0; k < ins.allocs; ++k) {
      const Temporary& t = body.temporaries[body.touches[ins.touches_begin + k]];
      if (t.kind == MemoryKind::kActivation) made += t.bytes;
    }
    for (int k = 0; k < ins.uses_end() - ins.touches_begin; ++k) {
      touched_at[body.touches[ins.touches_begin + k]] = made;
    }
  }
  return cold;
}

}  // namespace loom
