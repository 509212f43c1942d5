// What the halves of `loom profile` share: timing ops (cmd_profile_ops.cc)
// and measuring the host (cmd_profile.cc, with --comm's flags in
// profile_comm.cc). The measurements and fits are profiling/'s.
#ifndef LOOM_TOOLS_PROFILE_UTIL_H_
#define LOOM_TOOLS_PROFILE_UTIL_H_

#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cost_model/cluster.pb.h"
#include "cost_model/cost_table.h"
#include "framework/status.h"
#include "profiling/cpu_pressure.h"
#include "profiling/link_profile_options.h"
#include "profiling/op_profiler.h"
#include "profiling/plan_op_profile.h"
#include "profiling/report_text.h"

namespace loom {

// OK for a CPU cluster; else an error that `command` ("loom profile
// measures") works on this host's CPU.
Status CheckCpu(const proto::Cluster& cluster, const char* command);

// A --comm_*between_ms flag's value (`name` without the dashes): "MIN,MAX"
// milliseconds into seconds, or "0" (both 0).
Status ParseBetween(const std::string& name, const std::string& flag, double* min_seconds,
                    double* max_seconds);

// --comm's and --comm_shared_only's flags, checked (each error names its
// flag), with this process's place in a `loom launch` if it is in one.
StatusOr<LinkProfileOptions> LinkProfileOptionsFromFlags();

// A timed op as a cost table's row for `device`; `context` says where it
// was timed ("step", "alone").
proto::CostEntry CostEntryOf(const OpTiming& timing, const std::string& device,
                             const char* context);

// A plan's profile as cost table rows for `device`: its in-step timings
// ("step") and its ops timed alone ("alone"); only the signatures in
// `only`, when given.
std::vector<proto::CostEntry> CostEntriesOf(const PlanOpProfile& profile, const std::string& device,
                                            const std::set<std::string>* only = nullptr);

// Merges `entries` into the cost table at `path`, read just before (another
// profile may have written it meanwhile), and saves it; the merged table.
StatusOr<CostTable> MergeIntoCostTable(const std::string& path,
                                       const std::vector<proto::CostEntry>& entries,
                                       CostTable::MergeCounts* counts);

// Says, on `report` (null: nowhere), how much longer ranks that meet
// after each stretch of compute took than the mean in an in-step profile:
// on `copies` cores (`lockstep`), and two to a core (`shared_core_lockstep`);
// absent ones are not mentioned.
void ReportLockstep(std::optional<double> lockstep, std::optional<double> shared_core_lockstep,
                    int copies, FILE* report);

// How to time ops (--in_step, --profile_samples, --profile_warmup,
// --profile_min_sample_ms, --profile_max_bytes, --seed), checked; the
// device, the cache share and progress are the caller's.
StatusOr<PlanOpProfileOptions> PlanOpProfileOptionsFromFlags();

// Waits up to --wait_for_quiet_seconds for the host's other processes to
// leave the CPU (WaitForQuietCpu), and returns its CPU pressure then.
StatusOr<double> WaitForQuietCpuFromFlags();

// The op-timing half: `loom profile` without --comm or --calibrate_device.
Status ProfileOps();

}  // namespace loom

#endif  // LOOM_TOOLS_PROFILE_UTIL_H_
