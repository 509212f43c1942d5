// loom netcheck: measures the network between the ranks of a launch (see
// runtime/net_probe.h), e.g. the emulated one of `loom launch --net_rate`.
// Every rank runs the probe; rank 0 prints the result.
#include <cstdio>
#include <optional>

#include "cost_model/cluster.h"
#include "executor/comm/comm_world.h"
#include "executor/host_profiler.h"
#include "runtime/net_probe.h"
#include "tools/command.h"
#include "tools/common_flags.h"
#include "tools/launch_env.h"
#include "tools/profile_util.h"

DECLARE_int32(comm_timeout);
DECLARE_string(cluster_out);
DECLARE_string(comm_between_ms);
DEFINE_int32(calibrate_rounds, 81, "--cluster_out: timed rounds of every call");
DEFINE_int64(calibrate_max_bytes, 1 << 20,
             "--cluster_out: largest message (sizes go from 4 KiB by x4)");
DEFINE_int64(bytes, 16 << 20, "bytes per transfer (a multiple of 4)");
DEFINE_int32(repeats, 3, "transfers per phase");

namespace loom {
namespace {

// The mean time of each call, the way a step makes them, gathered from
// every member (meaningful on group rank 0, empty elsewhere).
StatusOr<std::vector<CommTiming>> TimeAcrossRanks(Communicator& comm,
                                                  const std::vector<StepCall>& calls,
                                                  const StepCallOptions& so) {
  LOOM_ASSIGN_OR_RETURN(StepCallTimes mine, TimeStepCalls(comm, calls, so));
  // Every member's times, in group-rank order.
  const int64_t total = static_cast<int64_t>(mine.arrive.size());
  Tensor local(TensorMeta{proto::FP64, {1, 2 * total}});
  std::copy(mine.arrive.begin(), mine.arrive.end(), local.data<double>());
  std::copy(mine.end.begin(), mine.end.end(), local.data<double>() + total);
  Tensor gathered;
  LOOM_RETURN_IF_ERROR(comm.AllGather(local, &gathered));
  if (comm.rank() != 0) return std::vector<CommTiming>();
  std::vector<StepCallTimes> members(comm.size());
  for (int r = 0; r < comm.size(); ++r) {
    const double* row = gathered.data<double>() + r * 2 * total;
    members[r].arrive.assign(row, row + total);
    members[r].end.assign(row + total, row + 2 * total);
  }
  const std::vector<double> means = MeanStepCallSeconds(members, calls, so);
  std::vector<CommTiming> timings;
  for (size_t i = 0; i < calls.size(); ++i) {
    timings.push_back({calls[i].op, calls[i].op == "send" ? 2 : comm.size(), calls[i].bytes,
                       means[i]});
  }
  return timings;
}

// Times allreduce, allgather and send between the launch's ranks the way
// a training step makes them (TimeStepCalls), and on rank 0 fits the link
// their group spans in --cluster and writes the cluster to --cluster_out.
Status Calibrate(Communicator& comm, const LaunchEnv& env) {
  LOOM_ASSIGN_OR_RETURN(proto::Cluster cluster, ClusterFromFlags());
  StepCallOptions so;
  LOOM_RETURN_IF_ERROR(ParseBetween(FLAGS_comm_between_ms, &so.min_seconds, &so.max_seconds));
  if (so.max_seconds <= 0) {
    return InvalidArgument("--comm_between_ms must give compute between calls for --cluster_out");
  }
  so.rounds = so.warmup_rounds + FLAGS_calibrate_rounds;
  std::vector<StepCall> calls;
  for (int64_t b = 4 << 10; b <= FLAGS_calibrate_max_bytes; b *= 4) {
    for (const char* op : {"allreduce", "allgather", "send"}) calls.push_back({op, b});
  }
  if (calls.empty()) return InvalidArgument("--calibrate_max_bytes must be at least 4096");
  if (env.rank == 0) {
    std::fprintf(stderr, "netcheck: timing %zu calls x %d rounds on %d ranks, each after %g-%g ms "
                 "of compute ...\n", calls.size(), so.rounds, comm.size(), so.min_seconds * 1e3,
                 so.max_seconds * 1e3);
  }
  so.together = true;
  LOOM_ASSIGN_OR_RETURN(std::vector<CommTiming> together, TimeAcrossRanks(comm, calls, so));
  so.together = false;
  LOOM_ASSIGN_OR_RETURN(std::vector<CommTiming> waited, TimeAcrossRanks(comm, calls, so));
  if (env.rank != 0) return Status::OK();
  // The link the group of every rank spans.
  bool one_node = true;
  for (int r = 1; r < comm.size(); ++r) one_node &= NodeOf(cluster, r) == NodeOf(cluster, 0);
  proto::Link* link = one_node ? cluster.mutable_intra_node() : cluster.mutable_inter_node();
  LOOM_RETURN_IF_ERROR(FitLink(
      together, waited,
      StrCat("loom netcheck --cluster_out, ", Today(), ": ", comm.size(), " ranks of a launch",
             env.host.empty() ? " on loopback" : StrCat(" on an emulated network, host ", env.host),
             ", means after ", so.min_seconds * 1e3, "-", so.max_seconds * 1e3,
             " ms of compute"),
      link));
  LOOM_RETURN_IF_ERROR(ValidateCluster(cluster).WithContext(FLAGS_cluster_out));
  LOOM_RETURN_IF_ERROR(SaveCluster(cluster, FLAGS_cluster_out));
  std::printf("wrote %s (%s link of cluster '%s')\n", FLAGS_cluster_out.c_str(),
              one_node ? "intra_node" : "inter_node", cluster.name().c_str());
  return Status::OK();
}

}  // namespace

Status RunNetcheck(const std::vector<std::string>& args) {
  if (!args.empty()) return InvalidArgument("unexpected argument '", args[0], "'");
  if (FLAGS_comm_timeout <= 0) return InvalidArgument("--comm_timeout must be positive");
  LOOM_ASSIGN_OR_RETURN(std::optional<LaunchEnv> env, LaunchEnvFromEnvironment());
  if (!env.has_value() || env->world_size < 2) {
    return FailedPrecondition("measures the network between ranks: run it under loom launch "
                              "with at least 2 ranks, e.g. 'loom launch --nproc 2 --net_rate "
                              "200mbit -- loom netcheck'");
  }
  ParallelLayout layout;
  layout.dp = env->world_size;
  CommWorldOptions comm;
  comm.timeout = std::chrono::seconds(FLAGS_comm_timeout);
  comm.host = env->host;
  comm.file_store_dir = env->store_dir;
  comm.job = "netcheck";
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CommWorld> world,
                        CommWorld::Create(layout, env->rank, comm));
  LOOM_ASSIGN_OR_RETURN(Communicator * all, world->Get(kDpRing));
  if (!FLAGS_cluster_out.empty()) return Calibrate(*all, *env);
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
