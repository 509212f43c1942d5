// One node's part of a launched job (`loom launch`, in the manner of
// torchrun): its ranks started as processes with launch_env.h's
// environment, watched (exit status, heartbeat files, the launch's own stop
// signals), stopped together when one fails with the failing rank named,
// and started again up to a number of times, each start agreed with the
// other nodes' launches (launch_generations.h).
#ifndef LOOM_RUNTIME_NODE_LAUNCH_H_
#define LOOM_RUNTIME_NODE_LAUNCH_H_

#include <csignal>
#include <functional>
#include <string>
#include <vector>

#include "framework/status.h"
#include "runtime/emulated_network.h"
#include "runtime/launch_generations.h"

namespace loom {

// Catches SIGINT, SIGTERM and SIGHUP while alive, so that a launch stops
// its ranks and removes what it made instead of dying; the previous
// handlers come back afterwards. One at a time.
class StopSignalCatcher {
 public:
  StopSignalCatcher();
  ~StopSignalCatcher();
  StopSignalCatcher(const StopSignalCatcher&) = delete;
  StopSignalCatcher& operator=(const StopSignalCatcher&) = delete;

 private:
  struct sigaction previous_[3];
};

struct NodeLaunchOptions {
  int nproc = 1;  // ranks on this node
  int nnodes = 1;
  int node_rank = 0;  // nodes hold consecutive ranks, nproc each
  // Seconds a loom rank may go without renewing its heartbeat before it is
  // named stopped or hung and the launch stopped; 0: never.
  double heartbeat_timeout = 10;
  int max_restarts = 0;
  // Each rank in its network namespace; null: this host's network.
  const EmulatedNetwork* net = nullptr;
  // Told each notice worth a line: a start joined, a restart, its cause.
  std::function<void(const std::string&)> note;
};

struct NodeLaunchReport {
  int restarts = 0;
  // User + system CPU of each local rank's last start, once it exited.
  std::vector<double> cpu_seconds;
};

// Runs `command` as every local rank of `options` until all exit 0 (OK),
// one fails and restarts run out (its failure, naming its global rank), or
// a stop signal arrives (under a StopSignalCatcher the caller made first).
// Each start meets in a fresh rendezvous directory, removed afterwards.
Status RunNodeLaunch(const NodeLaunchOptions& options, const std::vector<std::string>& command,
                     LaunchGenerations& generations, NodeLaunchReport* report);

}  // namespace loom

#endif  // LOOM_RUNTIME_NODE_LAUNCH_H_
