// loom profile --comm's call-CPU step: the CPU a rank spends on its own
// all-reduces back to back (in-process ranks, or this process of a
// launch), fitted into the link's CallCpu.
#include <gflags/gflags.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "executor/comm/comm_world.h"
#include "executor/cpu/host_threads.h"
#include "profiling/call_cpu_profiler.h"
#include "profiling/comm_fit.h"
#include "profiling/launch_member.h"
#include "tools/profile_util.h"

DEFINE_double(comm_call_cpu_seconds, 0.5,
              "--comm: time all-reduces back to back for about this long at each of three sizes (4 kB, "
              "64 kB, 1 MiB, up to --comm_max_bytes) in 5 rounds, beside a thread computing on "
              "each rank's core, with the process CPU clock less the compute's, and record the "
              "link's call_cpu (the CPU a call takes from its rank's core where ranks share "
              "cores); 0: not measured, the link's kept");

namespace loom {

StatusOr<std::vector<CallCpuSample>> MeasureCallCpuHere(int ranks, int64_t max_bytes,
                                                        const std::optional<LaunchEnv>& env) {
  if (!(FLAGS_comm_call_cpu_seconds >= 0) || FLAGS_comm_call_cpu_seconds > 60) {
    return InvalidArgument("--comm_call_cpu_seconds must be 0 to 60, got ",
                           FLAGS_comm_call_cpu_seconds);
  }
  if (FLAGS_comm_call_cpu_seconds == 0) return std::vector<CallCpuSample>();
  CallCpuOptions options;
  options.seconds_per_size = FLAGS_comm_call_cpu_seconds;
  options.sizes.clear();
  for (int64_t b : {int64_t{4} << 10, int64_t{64} << 10, int64_t{1} << 20}) {
    if (b <= max_bytes) options.sizes.push_back(b);
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
  return InProcessOrAsMember(
      env, "profile-call-cpu", options.timeout, [&] { return MeasureCallCpu(ranks, options); },
      [&](Communicator& all) { return MeasureCallCpuMember(all, core, options); });
}

Status RecordCallCpu(const std::vector<CallCpuSample>& samples, const std::string& source,
                     proto::HostLinkCosts* host) {
  if (samples.empty()) return Status::OK();
  // One latency step and one byte a byte: seconds_per_call + bytes /
  // bytes_per_second, on relative error as the link's own α-β.
  std::vector<CommSample> fit_samples;
  for (const CallCpuSample& s : samples) {
    CommSample f;
    f.label = StrCat("allreduce ", s.bytes, " B");
    f.terms.latency_steps = 1;
    f.terms.byte_factor = 1;
    f.bytes = static_cast<double>(s.bytes);
    f.seconds = s.cpu_seconds;
    fit_samples.push_back(f);
  }
  StatusOr<CommFit> fit = FitAlphaBeta(fit_samples);
  std::printf("call CPU: a rank's CPU a call, all-reduces back to back beside compute on every "
              "rank's core (the process CPU clock less the compute's: the call's threads and "
              "their kernel time)\n");
  for (size_t i = 0; i < samples.size(); ++i) {
    const CallCpuSample& s = samples[i];
    std::printf("  allreduce %8lld B  %4d calls  CPU %11s of %11s (%3.0f%%)%s\n",
                static_cast<long long>(s.bytes), s.calls, Time(s.cpu_seconds).c_str(),
                Time(s.wall_seconds).c_str(), 100 * s.cpu_seconds / std::max(s.wall_seconds, 1e-12),
                fit.ok() ? StrCat("  model ", Time(fit->predicted[i])).c_str() : "");
  }
  // A CPU that does not grow with the bytes (a busy host) determines no
  // rate: said, and the link's kept.
  if (!fit.ok()) {
    std::printf("call CPU: not recorded (%s); the link's kept\n",
                std::string(fit.status().message()).c_str());
    return Status::OK();
  }
  proto::CallCpu* c = host->mutable_call_cpu();
  c->set_seconds_per_call(fit->latency_seconds);
  c->set_bytes_per_second(fit->bandwidth);
  c->set_source(StrCat(source, ", rms residual ",
                       static_cast<int>(std::lround(100 * fit->rms_relative_residual)), "%"));
  std::printf("call CPU: %s a call + %s of bytes; rms residual %.1f%%\n",
              Time(fit->latency_seconds).c_str(), Rate(fit->bandwidth).c_str(),
              100 * fit->rms_relative_residual);
  return Status::OK();
}

}  // namespace loom
