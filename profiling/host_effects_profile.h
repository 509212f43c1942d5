// What communication does to the host beside the link's own costs, as
// `loom profile --comm` measures it after the link: how calls and
// computation slow each other (the interference), a long transfer's time,
// how long calls wait for cores that compute (core_wait) and the CPU a
// call takes (call_cpu). In-process ranks, or every member of a launch.
#ifndef LOOM_PROFILING_HOST_EFFECTS_PROFILE_H_
#define LOOM_PROFILING_HOST_EFFECTS_PROFILE_H_

#include <vector>

#include "cost_model/cluster.pb.h"
#include "framework/status.h"
#include "profiling/call_cpu_profiler.h"
#include "profiling/host_profiler.h"
#include "profiling/link_profile_options.h"

namespace loom {

struct HostEffects {
  InterferenceOptions io;
  InterferenceResult interference;
  static constexpr int kLongCalls = 3;
  double long_seconds = 0;  // kLongCalls all-reduces of options.long_bytes
  std::vector<CallCpuSample> call_cpu;
};

// Every member of a launch takes part; the wait for busy cores is fitted
// into `cluster` on rank 0 (and skipped, said so, where it cannot run:
// fewer cores than ranks, cores not pinned).
StatusOr<HostEffects> TimeHostEffects(const LinkProfileOptions& options, proto::Cluster* cluster);

}  // namespace loom

#endif  // LOOM_PROFILING_HOST_EFFECTS_PROFILE_H_
