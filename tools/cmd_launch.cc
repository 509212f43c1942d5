// loom launch: starts N processes on this node, one rank each, in the
// manner of torchrun and paddle.distributed.launch. Each child gets the
// environment of runtime/launch_env.h (its rank, the world size and a fresh
// directory where the ranks meet); when a child fails, the others are
// stopped and the failing rank is named. Under --nnodes each node runs its
// own launch, and the ranks of all of them meet in one redis-server. With
// --net_rate each rank runs in
// a network namespace of its own behind a shaped link
// (runtime/emulated_network.h), so that communication takes wall time
// without taking CPU. SIGINT, SIGTERM and SIGHUP stop the ranks and remove
// the network before launch exits.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "runtime/emulated_network.h"
#include "runtime/launch_env.h"
#include "runtime/launch_generations.h"
#include "runtime/node_launch.h"
#include "tools/command.h"
#include "tools/common_flags.h"

DEFINE_int32(nproc, 1, "processes (ranks) to start on this node");
DEFINE_int32(nproc_per_node, 0, "--nproc by torchrun's name");
DEFINE_int32(nnodes, 1,
             "nodes of the job, each running its own loom launch with the same --nproc, "
             "--rdzv_endpoint and --job_id; ranks are numbered node by node");
DEFINE_int32(node_rank, 0, "this node's place among the --nnodes, from 0");
DEFINE_string(net_rate, "",
              "emulate a network: each rank in a network namespace of its own with a link "
              "of this rate each way, in tc syntax (200mbit, 1gbit); needs root, ip and tc");
DEFINE_string(net_burst, "",
              "with --net_rate: tbf bucket of each link, tc size syntax (empty: 1 ms of "
              "traffic, at least 16kb)");
DEFINE_double(heartbeat_timeout, 10,
              "seconds a launched loom rank may go without renewing its heartbeat before it is "
              "named as stopped or hung and the launch stopped (0: never)");
DEFINE_string(rdzv_backend, "file",
              "where the ranks meet: file (a fresh directory on this machine) or redis (a "
              "redis-server at --rdzv_endpoint that every rank reaches; Gloo's RedisStore)");
DEFINE_string(rdzv_endpoint, "", "with --rdzv_backend redis: the redis-server's HOST:PORT");
DEFINE_string(job_id, "",
              "the launch's id, prefixing every key its ranks put in the store, so that jobs "
              "sharing a redis store never collide (empty: made from this host's name, "
              "launch's pid and the time)");
DEFINE_string(local_addr, "",
              "with --nnodes: the address of this node that the other nodes' ranks connect "
              "to (empty: this machine's address on its route to --rdzv_endpoint)");
DEFINE_int32(max_restarts, 0,
             "times to start every rank again when one fails, stops or hangs (torchrun's "
             "--max-restarts); a restarted 'loom run' resumes from the newest complete "
             "checkpoint of its --save_dir. Not after a signal to launch itself");
DEFINE_string(net_queue, "100ms",
              "with --net_rate: longest a packet queues at a link before it is dropped");

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;

// "0.031 s of CPU (rank 0 0.012 s, rank 1 0.019 s)"; beyond 8 ranks, the
// least and the most a rank used.
std::string CpuSummary(const std::vector<double>& cpu_seconds) {
  double total = 0, least = 1e300, most = 0;
  std::string each;
  for (size_t r = 0; r < cpu_seconds.size(); ++r) {
    const double cpu = cpu_seconds[r];
    total += cpu;
    least = std::min(least, cpu);
    most = std::max(most, cpu);
    char buf[48];
    std::snprintf(buf, sizeof(buf), "%srank %zu %.3f s", r == 0 ? "" : ", ", r, cpu);
    each += buf;
  }
  if (cpu_seconds.size() > 8) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.3f s to %.3f s per rank", least, most);
    each = buf;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f s", total);
  return StrCat(buf, " of CPU (", each, ")");
}

// --nnodes and --node_rank, and what a job across nodes needs: a store
// every node reaches, and one job id that every node's launch names.
Status CheckNodes() {
  if (FLAGS_nnodes < 1 || int64_t{FLAGS_nnodes} * FLAGS_nproc > (1 << 20)) {
    return InvalidArgument("--nnodes (", FLAGS_nnodes, ") x --nproc (", FLAGS_nproc,
                           ") must be 1 to 1048576 ranks");
  }
  if (FLAGS_node_rank < 0 || FLAGS_node_rank >= FLAGS_nnodes) {
    return InvalidArgument("--node_rank ", FLAGS_node_rank, " is outside 0..", FLAGS_nnodes - 1);
  }
  if (FLAGS_nnodes == 1) return Status::OK();
  if (FLAGS_rdzv_backend != "redis") {
    return InvalidArgument("--nnodes ", FLAGS_nnodes,
                           " needs a store every node reaches: --rdzv_backend redis "
                           "--rdzv_endpoint HOST:PORT");
  }
  if (FLAGS_job_id.empty()) {
    return InvalidArgument("--nnodes ", FLAGS_nnodes,
                           " needs --job_id: every node's launch must name the same job");
  }
  if (!FLAGS_net_rate.empty()) {
    return InvalidArgument("--net_rate emulates one machine's network; not with --nnodes");
  }
  return Status::OK();
}

// The store the ranks meet in, handed to them as LOOM_RDZV_ENDPOINT and
// LOOM_JOB_ID (launch_env.h). A redis-server that does not answer is named
// before any rank starts.
Status SetRendezvousEnv() {
  std::string job = FLAGS_job_id;
  if (job.empty()) {
    char host[256] = "host";
    gethostname(host, sizeof(host) - 1);
    job = StrCat("loom-", host, "-", getpid(), "-",
                 std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count());
  }
  if (job.find_first_of(" \t\n") != std::string::npos) {
    return InvalidArgument("--job_id '", job, "' holds white space");
  }
  setenv(kJobIdEnv, job.c_str(), 1);
  unsetenv(kHostEnv);
  if (!FLAGS_local_addr.empty() && FLAGS_nnodes == 1) {
    return InvalidArgument("--local_addr is for --nnodes above 1");
  }
  if (FLAGS_rdzv_backend == "file") {
    if (!FLAGS_rdzv_endpoint.empty()) {
      return InvalidArgument("--rdzv_endpoint is for --rdzv_backend redis");
    }
    unsetenv(kRdzvEndpointEnv);
    return Status::OK();
  }
  if (FLAGS_rdzv_backend != "redis") {
    return InvalidArgument("--rdzv_backend '", FLAGS_rdzv_backend, "' is not file or redis");
  }
  if (FLAGS_rdzv_endpoint.empty()) {
    return InvalidArgument("--rdzv_backend redis needs --rdzv_endpoint HOST:PORT");
  }
  LOOM_RETURN_IF_ERROR(ConnectRedisStore(FLAGS_rdzv_endpoint).status());
  setenv(kRdzvEndpointEnv, FLAGS_rdzv_endpoint.c_str(), 1);
  // Ranks on other nodes connect to this one's at an address they reach,
  // which loopback is not.
  if (FLAGS_nnodes > 1) {
    std::string host = FLAGS_local_addr;
    if (host.empty()) {
      StatusOr<std::string> routed = LocalAddressTowards(FLAGS_rdzv_endpoint);
      if (!routed.ok()) return routed.status().WithContext("--local_addr (give it)");
      host = std::move(routed).value();
    }
    setenv(kHostEnv, host.c_str(), 1);
  }
  return Status::OK();
}

}  // namespace

Status RunLaunch(const std::vector<std::string>& args) {
  if (args.empty()) return InvalidArgument("expects '-- COMMAND ARGS...' to start");
  if (FlagGiven("nproc_per_node")) {
    if (FlagGiven("nproc")) return InvalidArgument("--nproc and --nproc_per_node: give one");
    FLAGS_nproc = FLAGS_nproc_per_node;
  }
  if (FLAGS_nproc < 1) return InvalidArgument("--nproc must be at least 1");
  if (FLAGS_max_restarts < 0 || FLAGS_max_restarts > 1000) {
    return InvalidArgument("--max_restarts ", FLAGS_max_restarts, " is outside 0..1000");
  }
  LOOM_RETURN_IF_ERROR(CheckNodes());
  if (FLAGS_net_rate.empty() && (FlagGiven("net_burst") || FlagGiven("net_queue"))) {
    return InvalidArgument("--net_burst and --net_queue shape an emulated network: give "
                           "--net_rate too");
  }
  LOOM_RETURN_IF_ERROR(SetRendezvousEnv());
  // Which start of the job this launch's ranks join: agreed with the other
  // nodes' launches in a redis store, so that one replacing a lost node
  // joins the survivors' restart.
  LaunchGenerations generations;
  if (FLAGS_rdzv_backend == "redis") {
    LOOM_ASSIGN_OR_RETURN(generations,
                          LaunchGenerations::InRedis(FLAGS_rdzv_endpoint, getenv(kJobIdEnv)));
  }
  // Caught from here on: the network and the ranks are removed on the way
  // out whatever stops launch.
  StopSignalCatcher catcher;
  std::unique_ptr<EmulatedNetwork> net;
  if (!FLAGS_net_rate.empty()) {
    EmulatedNetworkOptions options;
    options.ranks = FLAGS_nproc;
    options.rate = FLAGS_net_rate;
    options.burst = FLAGS_net_burst;
    options.queue = FLAGS_net_queue;
    StatusOr<std::unique_ptr<EmulatedNetwork>> made = EmulatedNetwork::Create(options);
    if (!made.ok()) return made.status();
    net = std::move(made).value();
    std::fprintf(stderr, "loom launch: %s\n", net->Describe().c_str());
  }
  NodeLaunchOptions options;
  options.nproc = FLAGS_nproc;
  options.nnodes = FLAGS_nnodes;
  options.node_rank = FLAGS_node_rank;
  options.heartbeat_timeout = FLAGS_heartbeat_timeout;
  options.max_restarts = FLAGS_max_restarts;
  options.net = net.get();
  options.note = [](const std::string& line) {
    std::fprintf(stderr, "loom launch: %s\n", line.c_str());
  };
  const Clock::time_point start = Clock::now();
  NodeLaunchReport report;
  Status result = RunNodeLaunch(options, args, generations, &report);
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  if (report.restarts > 0) {
    std::fprintf(stderr, "loom launch: %s after %d restart(s)\n",
                 result.ok() ? "finished" : "failed", report.restarts);
  }
  if (net != nullptr) {
    Status removed = net->Destroy();
    if (!removed.ok() && result.ok()) result = removed;
    std::fprintf(stderr, "loom launch: ranks used %s in %.3f s wall; network %s %s\n",
                 CpuSummary(report.cpu_seconds).c_str(), wall, net->prefix().c_str(),
                 removed.ok() ? "removed" : "NOT fully removed");
  }
  return result;
}

}  // namespace loom
