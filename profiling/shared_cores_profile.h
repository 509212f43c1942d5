// Two groups of ranks on the same cores calling at once (the link's
// HostLinkCosts.shared_cores), as when a plan pins more ranks than the
// host has cores. In one process the groups are threads; under a launch
// (`loom launch --nproc 4 --net_rate ...`), its two halves, so that the
// emulated network's link gets the costs its runs see.
#ifndef LOOM_PROFILING_SHARED_CORES_PROFILE_H_
#define LOOM_PROFILING_SHARED_CORES_PROFILE_H_

#include <optional>
#include <vector>

#include "cost_model/cluster.pb.h"
#include "framework/status.h"
#include "profiling/host_profiler.h"
#include "profiling/link_profile_options.h"
#include "runtime/launch_env.h"

namespace loom {

// Calls timed in the step regime of `options` by two groups of ranks on
// the same cores, calling at once: in-process groups of options.ranks
// (ProfileCommOnSharedCores), or under a launch (`env`) its two halves,
// rank i of each half pinned to the process's i-th core. Each call's mean
// over the groups, on rank 0; none elsewhere. FailedPrecondition where the
// cores cannot be shared so (fewer cores than a group's ranks).
StatusOr<std::vector<CommTiming>> TimeOnSharedCores(const CommProfileOptions& options,
                                                    const std::optional<LaunchEnv>& env);

// Only the shared_cores costs of the link a group spans (`loom profile
// --comm_shared_only`), timed by TimeOnSharedCores with
// options.shared_between_*_seconds of compute before each call and fitted
// at the link's recorded duplex into `cluster`, whose link must have been
// measured; `*link_out` is that link, or null on a launch's ranks other
// than 0 or where the times determine no fit (said so, the file's kept).
Status ProfileSharedCores(const LinkProfileOptions& options, proto::Cluster* cluster,
                          proto::Link** link_out);

}  // namespace loom

#endif  // LOOM_PROFILING_SHARED_CORES_PROFILE_H_
