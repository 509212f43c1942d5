// Whether a run's tensors fit in this host's memory, checked before any is
// allocated: a batch too large for the host is an error naming what to
// lower, not a bad_alloc or a CHECK deep in the first step.
#ifndef LOOM_RUNTIME_HOST_MEMORY_H_
#define LOOM_RUNTIME_HOST_MEMORY_H_

#include <cstdint>
#include <string>

#include "framework/status.h"

namespace loom {

// Bytes this process may still allocate: the host's available memory
// (MemAvailable), or less under an address-space limit (ulimit -v).
int64_t AvailableHostBytes();

// OK when `bytes` fit in AvailableHostBytes(); else an error saying that
// `what` needs them and, as `lower`, what to make smaller.
Status CheckFitsInHost(int64_t bytes, const std::string& what, const std::string& lower);

}  // namespace loom

#endif  // LOOM_RUNTIME_HOST_MEMORY_H_
