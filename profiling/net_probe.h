// A bandwidth probe over a rank's communicators: how fast the network
// moves bytes, and how much CPU the ranks spend while it does. `loom
// netcheck` runs it under `loom launch`, with or without --net_rate.
//
// Phases, each started together by a small all-reduce:
//   send       group rank 0 sends `bytes` to group rank 1, `repeats` times
//              (the others wait): the rate of one link, one direction;
//   allreduce  every rank all-reduces `bytes` of FP32, `repeats` times: its
//              bus rate is 2 (n-1)/n bytes / time (the bytes each member
//              sends, executor/comm/README.md), the link rate when the
//              collective keeps every link busy both ways.
// CPU time is the process's (every thread, user + system, getrusage) over
// both phases, so a probe in which the network does the waiting reports a
// small fraction of the wall time.
#ifndef LOOM_PROFILING_NET_PROBE_H_
#define LOOM_PROFILING_NET_PROBE_H_

#include <cstdint>
#include <vector>

#include "executor/comm/communicator.h"
#include "framework/status.h"

namespace loom {

struct NetProbeOptions {
  int64_t bytes = 16 << 20;  // per transfer; a multiple of 4
  int repeats = 3;
};

// What every rank measured, gathered: the same on every member.
struct NetProbeReport {
  int ranks = 0;
  int64_t bytes = 0;
  int repeats = 0;
  // All repeats together: the receiver's time for the send phase, the
  // slowest member's for the all-reduce.
  double send_seconds = 0;
  double allreduce_seconds = 0;
  // Per rank, over both phases.
  std::vector<double> cpu_seconds;
  std::vector<double> wall_seconds;

  // Megabytes (1e6 bytes) per second.
  double SendMBps() const;
  double AllReduceBusMBps() const;
};

// Collective over every member of `comm` (at least two).
StatusOr<NetProbeReport> RunNetProbe(Communicator& comm, const NetProbeOptions& options);

}  // namespace loom

#endif  // LOOM_PROFILING_NET_PROBE_H_
