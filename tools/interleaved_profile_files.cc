#include "tools/interleaved_profile_files.h"

#include <optional>
#include <vector>

#include "cost_model/cluster.h"
#include "cost_model/cost_table.h"
#include "framework/file_util.h"
#include "profiling/link_fit.h"
#include "profiling/report_text.h"
#include "tools/profile_util.h"

namespace loom {
namespace {

// The profile's cluster: the one it measured for, with its lockstep
// slowdowns and the core wait fitted to its calls.
Status WriteCluster(const InterleavedProfile& profile, const InterleavedProfileFiles& files,
                    std::optional<double> lockstep, std::optional<double> shared_core_lockstep) {
  const InterleavedProfileOptions& o = profile.options();
  proto::Cluster cluster = o.cluster;
  if (profile.core_wait() != nullptr) {
    LOOM_RETURN_IF_ERROR(RecordCoreWait(
        profile.core_wait()->Timings(), /*ranks=*/2,
        StrCat("allreduce of ", o.core_wait_bytes, " B on 2 pinned ranks, medians of ",
               o.core_wait_calls, " calls after each of ", profile.sampled_steps(), " steps"),
        StrCat("loom run --interleaved_profile, ", Today(), ": allreduces of ", o.core_wait_bytes,
               " B beside compute bursts on 2 pinned ranks after each of the run's steps, "
               "medians"),
        &cluster, files.report));
  }
  // Under a launch only the shared cores' lockstep: the two-core one put
  // the emulated two-rank rows 4.8% to 12.6% long, where without it they
  // were within 8.4% (docs/simulator_accuracy.md).
  proto::SharedHost* host = cluster.mutable_shared_host();
  if (lockstep && !o.launch.has_value()) host->set_lockstep_slowdown(*lockstep);
  if (shared_core_lockstep) host->set_shared_core_lockstep(*shared_core_lockstep);
  LOOM_RETURN_IF_ERROR(ValidateCluster(cluster).WithContext(files.cluster_out));
  LOOM_RETURN_IF_ERROR(SaveCluster(cluster, files.cluster_out));
  PrintTo(files.report, "wrote %s (use it with --cluster %s)\n", files.cluster_out.c_str(),
          files.cluster_out.c_str());
  return Status::OK();
}

}  // namespace

Status CheckInterleavedProfileFiles(const InterleavedProfileOptions& options,
                                    const InterleavedProfileFiles& files) {
  if (options.core_wait_calls > 0 && files.cluster_out.empty()) {
    return InvalidArgument("core-wait calls between steps need a cluster file to write");
  }
  // Only the process that profiles writes.
  if (options.launch.has_value() && options.launch->rank != 0) return Status::OK();
  LOOM_RETURN_IF_ERROR(CostTable::LoadOrEmpty(files.cost_table).status());
  if (!files.cluster_out.empty()) LOOM_RETURN_IF_ERROR(CheckWritable(files.cluster_out));
  return Status::OK();
}

Status WriteInterleavedProfile(const InterleavedProfile& profile,
                               const InterleavedProfileFiles& files) {
  const InStepProfiler* profiler = profile.profiler();
  if (profiler == nullptr) return Status::OK();
  std::vector<proto::CostEntry> entries;
  for (const OpTiming& t : profiler->Timings()) {
    entries.push_back(CostEntryOf(t, files.device, "step"));
  }
  CostTable::MergeCounts counts;
  LOOM_ASSIGN_OR_RETURN(CostTable table, MergeIntoCostTable(files.cost_table, entries, &counts));
  PrintTo(files.report,
          "profiled %zu signatures in steps between the run's: %d added, %d replaced\n"
          "wrote %s (%d entries)\n",
          entries.size(), counts.added, counts.replaced, files.cost_table.c_str(), table.size());
  const std::optional<double> lockstep = profiler->LockstepSlowdown();
  const std::optional<double> shared = profiler->SharedCoreLockstep();
  ReportLockstep(lockstep, shared, profiler->copies(), files.report);
  return files.cluster_out.empty() ? Status::OK()
                                   : WriteCluster(profile, files, lockstep, shared);
}

}  // namespace loom
