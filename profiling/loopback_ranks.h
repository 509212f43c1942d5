// In-process ranks over loopback, for the host's measurements
// (host_profiler.h, core_wait_profiler.h): a thread per rank, and one Gloo
// group of them through a fresh store.
#ifndef LOOM_PROFILING_LOOPBACK_RANKS_H_
#define LOOM_PROFILING_LOOPBACK_RANKS_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "executor/comm/gloo_communicator.h"
#include "executor/tensor.h"
#include "framework/status.h"

namespace loom {

using LoopbackGroup = std::vector<std::unique_ptr<GlooCommunicator>>;

// Runs fn(r) for every rank on its own thread; the first error wins. A rank
// that fails leaves its peers waiting only until their call's timeout.
Status RunRanks(int n, const std::function<Status(int)>& fn);

// One group of `n` in-process ranks over loopback. With `cores`, rank r's
// thread keeps to cores[r] before its device exists, so that Gloo's
// event-loop thread does too, as a pinned training rank's.
StatusOr<LoopbackGroup> ConnectLoopback(int n, const std::string& job,
                                        std::chrono::milliseconds timeout,
                                        const std::vector<int>& cores = {});

// `n` fp32 elements of `value`.
Tensor Floats(int64_t n, float value);

}  // namespace loom

#endif  // LOOM_PROFILING_LOOPBACK_RANKS_H_
