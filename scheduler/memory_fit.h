// Whether a simulated plan fits its devices: each rank's simulated peak
// against the device's memory (cluster.proto's device.memory_bytes). A step
// time is a figure about nothing when a rank needs more than its device
// holds; the simulator's callers say which ranks, and by how much.
#ifndef LOOM_SCHEDULER_MEMORY_FIT_H_
#define LOOM_SCHEDULER_MEMORY_FIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "scheduler/simulator.h"

namespace loom {

// One part of a rank's peak memory: "activations", 71.2e9.
struct MemoryPart {
  std::string name;
  int64_t bytes = 0;
};
// A rank's peak by what it holds: activations kept for the backward,
// parameters (or, under AMP, their low-precision copies) and fp32 master
// weights, gradients (accumulated, and a micro-batch's), optimizer state,
// communication buffers and other temporaries. Largest first, none empty.
std::vector<MemoryPart> MemoryBreakdown(const RankMetrics& rank);
// The breakdown in units of `unit_bytes` named `unit`: "activations 71.2
// GB (12 layers, 0 recomputed), optimizer state 13.0 GB, ...".
std::string MemoryBreakdownText(const RankMetrics& rank, double unit_bytes = 1e9,
                                const char* unit = "GB");

// The ranks of `result` whose peak exceeds `device_bytes`, largest peak
// first (rank order among equals); none when `device_bytes` is 0 (not
// known).
std::vector<const RankMetrics*> RanksOverDeviceMemory(const SimulationResult& result,
                                                      int64_t device_bytes);

// "rank 3 needs 96.4 GB of 80.0 GB: activations 71.2 GB (12 layers, 0
// recomputed), optimizer state 13.0 GB, ...".
std::string OverDeviceMemoryMessage(const RankMetrics& rank, int64_t device_bytes);

// One line for a result: "every rank fits 80.0 GB (largest peak 30.9 GB,
// rank 0)", or "2 of 8 ranks do not fit 80.0 GB: rank 0 needs ...; rank 1
// needs ..." (the first `named` of them, then how many more).
std::string DeviceMemorySummary(const SimulationResult& result, int64_t device_bytes,
                                int named = 3);

}  // namespace loom

#endif  // LOOM_SCHEDULER_MEMORY_FIT_H_
