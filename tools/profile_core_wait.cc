// loom profile --comm's core-wait step: all-reduces beside compute bursts
// on the ranks' cores (in-process ranks, or the processes of a launch),
// fitted into the cluster's CoreWait.
#include <gflags/gflags.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "executor/cpu/host_threads.h"
#include "profiling/core_wait_fit.h"
#include "profiling/core_wait_profiler.h"
#include "profiling/launch_member.h"
#include "tools/profile_util.h"

DEFINE_int32(comm_core_wait_calls, 0,
             "--comm: time this many all-reduces beside each length of compute burst on the "
             "ranks' cores (in-process ranks, or a launch's with a core each) and record the "
             "cluster's core_wait; 0: not measured, the cluster's kept (off by default: since "
             "Gloo's loop thread yields to compute, the fit priced training steps on this host "
             "slow, docs/simulator_accuracy.md)");
DEFINE_int64(comm_core_wait_bytes, 16 << 10,
             "--comm_core_wait_calls: the all-reduces' size (small, so that the wait and not the "
             "bytes decides; the fit takes the bytes' part from the link)");

namespace loom {
namespace {

constexpr double kMaxCoreWaitResidual = 0.5;

}  // namespace

Status ProfileCoreWait(proto::Cluster* cluster, const std::optional<LaunchEnv>& env) {
  // Every member of a launch takes part; its rank 0 prints and records.
  const bool prints = !env.has_value() || env->rank == 0;
  if (FLAGS_comm_core_wait_calls < 0) {
    return InvalidArgument("--comm_core_wait_calls must not be negative, got ",
                           FLAGS_comm_core_wait_calls);
  }
  if (FLAGS_comm_core_wait_calls == 0) return Status::OK();
  if (cluster->shared_host().core_sharing() != proto::SharedHost::PINNED) {
    if (prints) std::printf("core wait: not measured (shared_host.core_sharing is not PINNED)\n");
    return Status::OK();
  }
  if (FLAGS_comm_core_wait_bytes < 4 || FLAGS_comm_core_wait_bytes > (int64_t{1} << 30)) {
    return InvalidArgument("--comm_core_wait_bytes must be 4 to 2^30, got ",
                           FLAGS_comm_core_wait_bytes);
  }
  CoreWaitOptions options;
  options.calls = FLAGS_comm_core_wait_calls;
  options.bytes = FLAGS_comm_core_wait_bytes;
  if (env.has_value()) options.ranks = env->world_size;
  if (prints) {
    std::fprintf(stderr, "timing allreduces of %lld B beside compute bursts on the ranks' "
                 "cores ...\n", static_cast<long long>(options.bytes));
  }
  StatusOr<std::vector<CoreWaitTiming>> timings = std::vector<CoreWaitTiming>();
  const std::vector<int> cores = CoresOfThisProcess();
  if (env.has_value() && static_cast<int>(cores.size()) < env->world_size) {
    // The same answer on every rank of the host: all skip.
    timings = FailedPrecondition("the core-wait measurement needs a core for each of the ",
                                 env->world_size, " ranks; this process may use ", cores.size());
  } else {
    // Under a launch, rank r on core r mod cores, as loom run pins a
    // launch's ranks.
    timings = InProcessOrAsMember(
        env, "profile-core-wait", options.timeout, [&] { return MeasureCoreWait(options); },
        [&](Communicator& all) {
          return MeasureCoreWaitMember(all, cores[env->rank % cores.size()], options);
        });
  }
  if (!timings.ok() && timings.status().code() == StatusCode::kFailedPrecondition) {
    if (prints) {
      std::printf("core wait: not measured (%s); the cluster's kept\n",
                  timings.status().message().c_str());
    }
    return Status::OK();
  }
  LOOM_RETURN_IF_ERROR(timings.status());
  if (!prints) return Status::OK();
  return RecordCoreWait(
      *timings, options.ranks,
      StrCat("allreduce of ", options.bytes, " B on ", options.ranks, " pinned ranks, medians of ",
             options.calls, " calls"),
      StrCat("loom profile --comm, ", Today(), ": allreduces of ", options.bytes,
             " B beside compute bursts on ", options.ranks, " pinned ranks",
             env.has_value() ? " of a launch" : "", ", medians"),
      cluster);
}

Status RecordCoreWait(const std::vector<CoreWaitTiming>& timings, int ranks,
                      const std::string& heading, const std::string& source,
                      proto::Cluster* cluster, FILE* out) {
  // Idle cores are priced by the link (a call on them wakes a halted core,
  // in the step regime the link was fitted in): shown, not fitted.
  std::vector<CoreWaitSample> samples;
  double idle = -1;
  for (const CoreWaitTiming& t : timings) {
    if (t.burst_seconds > 0) {
      samples.push_back({t.burst_seconds, t.median_seconds});
    } else {
      idle = t.median_seconds;
    }
  }
  // Each rank on a core of its own: the simulator takes the longest wait
  // over the parties' cores, and so does the fit.
  LOOM_ASSIGN_OR_RETURN(CoreWaitFit fit, FitCoreWait(samples, ranks));
  PrintTo(out, "core wait: %s\n", heading.c_str());
  if (idle >= 0) {
    PrintTo(out, "  on idle cores                      measured %11s  (not fitted)\n",
            Time(idle).c_str());
  }
  for (size_t i = 0; i < samples.size(); ++i) {
    const double burst = samples[i].burst_seconds;
    PrintTo(
        out, "  beside %-28s measured %11s  model %11s\n",
        std::isinf(burst) ? "compute that never pauses" : StrCat("bursts of ", Time(burst)).c_str(),
        Time(samples[i].call_seconds).c_str(), Time(fit.predicted[i]).c_str());
  }
  PrintTo(out,
          "core wait: %.2f waits of at most %s each; %s on busy cores with nothing to wait "
          "for (not recorded: the link's awake costs price that); rms residual %.1f%%\n",
          fit.waits, Time(fit.slice_seconds).c_str(), Time(fit.busy_call_seconds).c_str(),
          100 * fit.rms_relative_residual);
  // A fit this far from its samples describes nothing the simulator could
  // use: on the emulated network calls beside compute ran faster than on
  // idle cores (the wire, not the core, decides there).
  if (fit.rms_relative_residual > kMaxCoreWaitResidual) {
    PrintTo(out,
            "core wait: not recorded (rms residual over %.0f%%: the model of waits for busy "
            "cores does not describe these calls); the cluster's kept\n",
            100 * kMaxCoreWaitResidual);
    return Status::OK();
  }
  proto::CoreWait* w = cluster->mutable_shared_host()->mutable_core_wait();
  w->set_waits(fit.waits);
  w->set_slice_seconds(fit.slice_seconds);
  w->set_source(StrCat(source, ", rms residual ",
                       static_cast<int>(std::lround(100 * fit.rms_relative_residual)), "%"));
  return Status::OK();
}

}  // namespace loom
