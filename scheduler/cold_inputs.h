// Which reads of a rank's ops miss a CPU's cache. A forward job's kept
// activations stay in the last-level cache until later activations push
// them out: an FThenB stage reads its first micro-batches' activations in
// its backward after every other micro-batch's forward made more, a 1F1B
// stage after one or two. The ops that read them from memory run slower
// (docs/simulator_accuracy.md, "Activations read past the cache"), so a
// profile taken in one schedule prices ops of another by how many more or
// fewer bytes they read past the cache.
#ifndef LOOM_SCHEDULER_COLD_INPUTS_H_
#define LOOM_SCHEDULER_COLD_INPUTS_H_

#include <cstdint>
#include <vector>

#include "scheduler/execution_graph.h"

namespace loom {

// For each instruction of `body` (by id), the bytes of temporaries it
// reads that were last touched before the rank's calc stream made at least
// `cache_bytes` more activations (MemoryKind::kActivation): an LRU cache
// of that size, filled by the tensors a rank keeps, no longer holds them.
// Temporaries a job makes and frees reuse the same blocks and do not
// count. 0 off the calc stream, for data fed before the step, and
// everywhere when cache_bytes <= 0. Linear in instructions and touches.
std::vector<int64_t> ColdInputBytes(const RankGraphBody& body, int64_t cache_bytes);

}  // namespace loom

#endif  // LOOM_SCHEDULER_COLD_INPUTS_H_
