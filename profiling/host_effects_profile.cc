#include "profiling/host_effects_profile.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "executor/cpu/host_threads.h"
#include "profiling/core_wait_profiler.h"
#include "profiling/launch_member.h"
#include "profiling/link_fit.h"
#include "profiling/report_text.h"

namespace loom {
namespace {

// How long calls wait for cores that compute, fitted and recorded as
// `cluster`'s core_wait on rank 0.
Status ProfileCoreWait(const LinkProfileOptions& o, proto::Cluster* cluster) {
  const std::optional<LaunchEnv>& env = o.launch;
  const bool prints = !env.has_value() || env->rank == 0;
  if (o.core_wait_calls == 0) return Status::OK();
  if (cluster->shared_host().core_sharing() != proto::SharedHost::PINNED) {
    if (prints) {
      PrintTo(o.out, "core wait: not measured (shared_host.core_sharing is not PINNED)\n");
    }
    return Status::OK();
  }
  CoreWaitOptions options;
  options.calls = o.core_wait_calls;
  options.bytes = o.core_wait_bytes;
  if (env.has_value()) options.ranks = env->world_size;
  if (prints) {
    std::fprintf(stderr,
                 "timing allreduces of %lld B beside compute bursts on the ranks' cores ...\n",
                 static_cast<long long>(options.bytes));
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
      PrintTo(o.out, "core wait: not measured (%s); the cluster's kept\n",
              timings.status().message().c_str());
    }
    return Status::OK();
  }
  LOOM_RETURN_IF_ERROR(timings.status());
  if (!prints) return Status::OK();
  return RecordCoreWait(*timings, options.ranks,
                        StrCat("allreduce of ", options.bytes, " B on ", options.ranks,
                               " pinned ranks, medians of ", options.calls, " calls"),
                        StrCat("loom profile --comm, ", Today(), ": allreduces of ", options.bytes,
                               " B beside compute bursts on ", options.ranks, " pinned ranks",
                               env.has_value() ? " of a launch" : "", ", medians"),
                        cluster, o.out);
}

// The CPU a rank spends on its own all-reduces back to back beside
// compute, at sizes up to options.max_bytes; none where not asked for.
StatusOr<std::vector<CallCpuSample>> MeasureCallCpuHere(const LinkProfileOptions& o) {
  const std::optional<LaunchEnv>& env = o.launch;
  if (o.call_cpu_seconds == 0) return std::vector<CallCpuSample>();
  CallCpuOptions options;
  options.seconds_per_size = o.call_cpu_seconds;
  options.sizes.clear();
  for (int64_t b : {int64_t{4} << 10, int64_t{64} << 10, int64_t{1} << 20}) {
    if (b <= o.max_bytes) options.sizes.push_back(b);
  }
  // Two sizes at least determine the CPU a byte.
  if (options.sizes.size() < 2) options.sizes = {4 << 10, 64 << 10};
  if (!env.has_value() || env->rank == 0) {
    std::fprintf(stderr, "timing the CPU of allreduces back to back beside compute ...\n");
  }
  // Under a launch, rank r on core r mod cores, as loom run pins a
  // launch's ranks; Gloo's thread, made with the launch's world, keeps to
  // it too.
  const std::vector<int> cores = CoresOfThisProcess();
  const int core = env.has_value() ? cores[env->rank % cores.size()] : -1;
  if (env.has_value()) PinThread(pthread_self(), core);
  const int ranks = o.ranks;
  return InProcessOrAsMember(
      env, "profile-call-cpu", options.timeout, [&] { return MeasureCallCpu(ranks, options); },
      [&](Communicator& all) { return MeasureCallCpuMember(all, core, options); });
}

}  // namespace

StatusOr<HostEffects> TimeHostEffects(const LinkProfileOptions& options, proto::Cluster* cluster) {
  const std::optional<LaunchEnv>& env = options.launch;
  const bool prints = !env.has_value() || env->rank == 0;
  const int ranks = env.has_value() ? env->world_size : options.ranks;
  HostEffects h;
  // How communication and computation slow each other on this host.
  h.io.ranks = ranks;
  h.io.seconds = options.interference_seconds;
  h.io.allreduce_bytes = std::min<int64_t>(options.max_bytes, 4 << 20);
  if (prints) {
    std::fprintf(stderr, "timing %lldx%lld matmul loops alone and beside an allreduce loop ...\n",
                 static_cast<long long>(h.io.matmul_dim), static_cast<long long>(h.io.matmul_dim));
  }
  LOOM_ASSIGN_OR_RETURN(
      h.interference,
      InProcessOrAsMember(
          env, "profile-interference", std::nullopt, [&] { return MeasureInterference(h.io); },
          [&](Communicator& all) { return MeasureInterferenceMember(all, h.io); }));
  if (options.long_bytes > 0) {
    const int64_t bytes = options.long_bytes;
    if (prints) {
      std::fprintf(stderr, "timing %d allreduces of %lld B ...\n", HostEffects::kLongCalls,
                   static_cast<long long>(bytes));
    }
    LOOM_ASSIGN_OR_RETURN(
        h.long_seconds,
        InProcessOrAsMember(
            env, "profile-long", h.io.timeout,
            [&] { return TimeLongAllReduce(ranks, bytes, HostEffects::kLongCalls, h.io.timeout); },
            [&](Communicator& all) {
              return TimeLongAllReduceMember(all, bytes, HostEffects::kLongCalls);
            }));
  }
  // How long calls wait for cores that compute (all of a launch's ranks
  // take part; its rank 0 records).
  LOOM_RETURN_IF_ERROR(ProfileCoreWait(options, cluster));
  // Last: a launch's member pins its thread for it.
  LOOM_ASSIGN_OR_RETURN(h.call_cpu, MeasureCallCpuHere(options));
  return h;
}

}  // namespace loom
