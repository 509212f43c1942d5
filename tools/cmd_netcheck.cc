// loom netcheck: measures the network between the ranks of a launch (see
// profiling/net_probe.h), e.g. the emulated one of `loom launch --net_rate`.
// Every rank runs the probe; rank 0 prints the result.
#include <cstdio>
#include <optional>

#include "executor/comm/comm_world.h"
#include "profiling/net_probe.h"
#include "runtime/launch_env.h"
#include "tools/command.h"

DECLARE_int32(comm_timeout);
DEFINE_int64(bytes, 16 << 20, "bytes per transfer (a multiple of 4)");
DEFINE_int32(repeats, 3, "transfers per phase");

namespace loom {

Status RunNetcheck(const std::vector<std::string>& args) {
  if (!args.empty()) return InvalidArgument("unexpected argument '", args[0], "'");
  if (FLAGS_comm_timeout <= 0) return InvalidArgument("--comm_timeout must be positive");
  LOOM_ASSIGN_OR_RETURN(std::optional<LaunchEnv> env, LaunchEnvFromEnvironment());
  if (!env.has_value() || env->world_size < 2) {
    return FailedPrecondition("measures the network between ranks: run it under loom launch "
                              "with at least 2 ranks, e.g. 'loom launch --nproc 2 --net_rate "
                              "200mbit -- loom netcheck'");
  }
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CommWorld> world,
                        LaunchWorld(*env, "netcheck", std::chrono::seconds(FLAGS_comm_timeout)));
  LOOM_ASSIGN_OR_RETURN(Communicator * all, world->Get(kDpRing));
  NetProbeOptions options;
  options.bytes = FLAGS_bytes;
  options.repeats = FLAGS_repeats;
  LOOM_ASSIGN_OR_RETURN(NetProbeReport report, RunNetProbe(*all, options));
  if (env->rank != 0) return Status::OK();
  std::printf("netcheck: %d ranks, %lld bytes per transfer, %d repeats, host %s\n", report.ranks,
              static_cast<long long>(report.bytes), report.repeats, env->host.c_str());
  std::printf("send 0->1 seconds %.3f MB/s %.2f\n", report.send_seconds, report.SendMBps());
  std::printf("allreduce seconds %.3f bus_MB/s %.2f\n", report.allreduce_seconds,
              report.AllReduceBusMBps());
  for (int r = 0; r < report.ranks; ++r) {
    std::printf("rank %d cpu_seconds %.3f wall_seconds %.3f\n", r, report.cpu_seconds[r],
                report.wall_seconds[r]);
  }
  std::fflush(stdout);
  return Status::OK();
}

}  // namespace loom
