// Counter-based random numbers: every draw is a pure function of a key
// and a counter (splitmix64), with no generator state. So any element can
// be drawn on its own, on any rank, in any order, and come out the same:
// what dropout masks, data batches and seeded feeds need to be equal
// under every layout and across a resumed run.
#ifndef LOOM_FRAMEWORK_COUNTER_RNG_H_
#define LOOM_FRAMEWORK_COUNTER_RNG_H_

#include <cstdint>

// nvcc compiles these for the device too, so that the CUDA dropout draws
// with this one implementation (executor/kernels/cuda/dropout.cu).
#include "framework/host_device.h"

namespace loom {

// splitmix64's finalizer: a bijective 64-bit mix with full avalanche.
LOOM_HOST_DEVICE inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Element i of the splitmix64 stream keyed by `key`; chained, a stream
// keyed by several counters.
LOOM_HOST_DEVICE inline uint64_t StreamAt(uint64_t key, uint64_t i) {
  constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
  return Mix64(key + (i + 1) * kGolden);
}

// One splitmix64 step from state x: StreamAt(x, 0).
LOOM_HOST_DEVICE inline uint64_t SplitMix64(uint64_t x) { return StreamAt(x, 0); }

// Uniform in [0, 1) from the top 53 bits of a draw.
LOOM_HOST_DEVICE inline double ToUnit(uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }

}  // namespace loom

#endif  // LOOM_FRAMEWORK_COUNTER_RNG_H_
