// The host's last-level cache, and what reading past it costs one core:
// the figures the simulator needs to price ops by the bytes they read that
// later activations pushed out of the cache (Device.cache_bytes,
// Device.uncached_read_seconds_per_byte; scheduler/cold_inputs.h).
#ifndef LOOM_PROFILING_CACHE_PROFILE_H_
#define LOOM_PROFILING_CACHE_PROFILE_H_

#include <cstdint>
#include <string>

#include "framework/status.h"

namespace loom {

struct CacheCalibration {
  int64_t cache_bytes = 0;  // the largest cache level's, shared by its cores
  // One thread summing a buffer an eighth of the cache, again and again,
  // and one four times the cache: bytes read per second.
  double cached_read_rate = 0;
  double memory_read_rate = 0;
  // How much longer a matmul takes, a byte of its operands, when they
  // come from memory than from the cache (at least 0).
  double uncached_read_seconds_per_byte = 0;
};

// The largest cache level of CPU 0 in `sysfs_cpu0` (its cache/index*/
// level and size files); NotFound where it lists none.
StatusOr<int64_t> LastLevelCacheBytes(
    const std::string& sysfs_cpu0 = "/sys/devices/system/cpu/cpu0");

// Best of a few reads of each buffer.
StatusOr<CacheCalibration> CalibrateCache();

}  // namespace loom

#endif  // LOOM_PROFILING_CACHE_PROFILE_H_
