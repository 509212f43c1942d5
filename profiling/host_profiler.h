// Measurements of this host for its cluster description (`loom profile
// --comm --device`): Gloo collective times between in-process ranks on
// loopback, how much a communication loop slows a compute loop on the same
// cores, and the CPU's attainable rates. Only measuring is here; fitting
// and writing the cluster file is the caller's (profiling/comm_fit.h).
#ifndef LOOM_PROFILING_HOST_PROFILER_H_
#define LOOM_PROFILING_HOST_PROFILER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "executor/comm/communicator.h"
#include "framework/status.h"

namespace loom {

struct CommProfileOptions {
  int ranks = 2;
  // Bytes per member, as OpWork counts them: the allreduce buffer, one
  // allgather part, the message.
  std::vector<int64_t> sizes = {4 << 10, 16 << 10, 64 << 10, 256 << 10,
                                1 << 20, 4 << 20, 16 << 20};
  int warmup_runs = 2;
  int samples = 7;
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
  // Compute between calls, as in a training step (TimeStepCalls with
  // these bounds and `together`; `samples` rounds): a call's time is then
  // the mean over rounds (a step pays for every slow call). 0: calls back
  // to back with the cores kept awake, the median.
  double between_calls_min_seconds = 0;
  double between_calls_max_seconds = 0;
  bool together = false;
  // Where positive, the calls that would put more bytes on the wire (Loom's
  // direct algorithms) are not timed: on a link shaped by a token bucket,
  // the calls its credit covers. Larger calls there measure the shaper's
  // rate, and each drains the credit of the calls timed after it.
  int64_t max_wire_bytes = 0;
  // Seeds the compute times between calls (StepCallOptions::seed).
  uint64_t seed = 1234;
};

struct CommTiming {
  std::string op;  // "allreduce", "allgather", "send"
  int ranks = 0;
  int64_t bytes = 0;
  // The median back to back; the mean with compute between calls.
  double median_seconds = 0;
};

// The bytes `call` puts on the wire under Loom's direct algorithms.
double WireBytesOf(const CommTiming& call);

// The calls ProfileCommMember times among `ranks`, in its order: an
// allreduce, an allgather and a send of each size, less those over
// `o.max_wire_bytes`.
std::vector<CommTiming> CommCases(const CommProfileOptions& o, int ranks);

// `step`'s calls timed back to back with the cores kept awake (no compute
// between; the default rounds), less those that put `send_buffer_bytes`
// or more on the wire (0: unknown, none left out). Back to back, a call
// that filled the socket's send buffer left every call after it in its
// round a scheduler tick late on this host, a stall no step meets (its
// large calls come between compute); the awake costs price the small,
// latency-bound calls.
CommProfileOptions AwakeCallOptions(const CommProfileOptions& step, int64_t send_buffer_bytes);

// Whether `awake` (AwakeCallOptions' calls) took longer than `together`
// (the same calls after compute, parties arriving together) in most of the
// calls both timed. Cores kept awake only spare a call its wake-ups, so
// that is a stall of the host's scheduling, not the link: on this host,
// some whole runs of back-to-back calls came a scheduler tick late each.
bool AwakeCallsStalled(const std::vector<CommTiming>& awake,
                       const std::vector<CommTiming>& together);

// Called before each round of calls, with a label for a progress line.
using HostProgressFn = std::function<void(const std::string& what)>;

// Times AllReduce and AllGather among options.ranks in-process ranks, and
// one-way Send, at every size: each round makes every call once. Back to
// back (no compute between calls), a call's time is rank 0's median over
// the timed rounds with the cores kept awake (see the .cc); with compute
// between calls, the mean from the last party's arrival (TimeStepCalls).
StatusOr<std::vector<CommTiming>> ProfileComm(
    const CommProfileOptions& options, const HostProgressFn& progress = nullptr);

// The same measurement from one member of `comm` (options.ranks is
// ignored: comm's size counts): every member calls it, in its own thread
// or process (under `loom launch`, over the network between them). Group
// rank 0 returns the timings; the others return none.
StatusOr<std::vector<CommTiming>> ProfileCommMember(
    Communicator& comm, const CommProfileOptions& options,
    const HostProgressFn& progress = nullptr);

// ProfileComm in the step regime (options.between_calls_max_seconds > 0)
// on cores that two ranks share, as when a plan pins more ranks than the
// host has cores: `groups` groups of options.ranks in-process ranks, rank
// r of every group pinned to the same core, all timing their calls at once
// with compute times of their own. Each call's mean over the groups' means.
// FailedPrecondition where this process has fewer cores than
// options.ranks.
StatusOr<std::vector<CommTiming>> ProfileCommOnSharedCores(
    const CommProfileOptions& options, int groups, const HostProgressFn& progress = nullptr);

// Calls made the way a training step makes them, for calibrating the
// communication model in the regime runs see: before each call the rank
// runs a small matmul loop for a random time in [min_seconds,
// max_seconds], so that the parties arrive apart and wait for each other
// as in a step (or, `together`, all at once), with the cores idle or
// computing meanwhile (they are not kept awake), and a rank done with a
// call computes on while a slower party finishes its side, as in a step.
// A call's time is from its last party's arrival to its last party's
// return: on this host several times that of calls made back to back.
struct StepCallOptions {
  double min_seconds = 1e-4;
  double max_seconds = 1e-3;
  // Every rank draws the same times, so that the parties arrive together
  // (nobody waits); otherwise each draws its own and they arrive apart.
  bool together = false;
  int rounds = 33;  // each call once per round
  int warmup_rounds = 2;
  // The compute times' generator starts here (plus the rank's number where
  // the parties arrive apart).
  uint64_t seed = 1234;
};
struct StepCall {
  std::string op;  // "allreduce", "allgather" (every member) or "send" (0 -> 1)
  int64_t bytes = 0;
};
// One rank's arrival and return times (seconds on the monotonic clock,
// comparable across the processes of a host) for every round of `calls`,
// round after round. Collective over `comm`'s members.
struct StepCallTimes {
  std::vector<double> arrive, end;
};
StatusOr<StepCallTimes> TimeStepCalls(Communicator& comm, const std::vector<StepCall>& calls,
                                      const StepCallOptions& options);
// The mean time of each call over the timed rounds, from every member's
// times (in group-rank order); a send counts ranks 0 and 1.
std::vector<double> MeanStepCallSeconds(const std::vector<StepCallTimes>& members,
                                        const std::vector<StepCall>& calls,
                                        const StepCallOptions& options);

struct InterferenceOptions {
  int64_t matmul_dim = 256;        // square fp32 sgemm, one OpenBLAS thread
  // Threads running the matmul loop; 0: one per core, as when every rank's
  // compute stream is busy (one thread alone would leave the communication
  // a free core and measure nothing).
  int compute_threads = 0;
  double seconds = 1.0;  // matmuls alone, allreduces alone, both: each about this in all
  int cycles = 5;                  // alone/beside pairs; the median ratio counts
  int ranks = 2;                   // ranks of the allreduce loop
  int64_t allreduce_bytes = 4 << 20;
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
};

// Medians over the cycles of the per-cycle values.
struct InterferenceResult {
  double alone_seconds = 0;      // mean time of one matmul, nothing else running
  double with_comm_seconds = 0;  // the same while the allreduce loop runs
  double slowdown = 0;           // median of the cycles' with_comm / alone
  int64_t allreduces = 0;        // calls made by the loops, all cycles
  int compute_threads = 0;
  // The other direction: one allreduce alone and while the matmuls run
  // (means over each cycle's calls), and the median of the cycles'
  // with_compute / alone, the cluster's compute_comm_slowdown.
  double allreduce_alone_seconds = 0;
  double allreduce_with_compute_seconds = 0;
  double comm_slowdown = 0;
};

// Times a fixed matmul loop on compute_threads threads alone and while
// `ranks` more threads run back-to-back allreduces, alternating: on a CPU
// host Gloo's threads use the cores the kernels need, and the ratio of the
// mean matmul times is the cluster's comm_compute_slowdown.
StatusOr<InterferenceResult> MeasureInterference(const InterferenceOptions& options);

// The same measurement from one member of `comm` (its own process under
// `loom launch`, over the network between them): compute_threads matmul
// threads of its own (0: the host's cores over comm's size) beside its
// allreduce loop. Every member calls it; each returns its own figures.
StatusOr<InterferenceResult> MeasureInterferenceMember(Communicator& comm,
                                                       const InterferenceOptions& options);

// The mean time of `calls` allreduces of `bytes` (after one untimed) from
// one member of `comm`: how a long transfer fares. Where a shaper limits
// the link's rate with a token bucket, calls of a few buckets leave mostly
// at once and a fit to them overstates the rate of larger ones. Every
// member calls it; each returns its own time.
StatusOr<double> TimeLongAllReduceMember(Communicator& comm, int64_t bytes, int calls);
// The same with `ranks` members in this process (over loopback); rank 0's.
StatusOr<double> TimeLongAllReduce(int ranks, int64_t bytes, int calls,
                                   std::chrono::milliseconds timeout);

struct DeviceCalibration {
  int cores = 0;
  // One thread's best sgemm rate and copy bandwidth (read + written).
  double core_fp32_flops = 0;
  double core_memory_bandwidth = 0;
  // The same sgemm's rate sampled every quarter second over the
  // calibration's `seconds`, in time order: how much the host's own speed
  // moves, which bounds how closely any model can predict a run on it.
  std::vector<double> core_fp32_flops_over_time;
  // The executor's cost of one tiny op (dispatch, allocation, kernel call).
  double dispatch_seconds = 0;
  int64_t memory_bytes = 0;
};

// Best of a few runs: a 1024^3 sgemm, a 256 MiB copy, and a one-element
// `scale` op through the serial executor (its median); and the sgemm's
// rate every quarter second for `seconds` (none at 0).
StatusOr<DeviceCalibration> CalibrateDevice(double seconds = 0);

}  // namespace loom

#endif  // LOOM_PROFILING_HOST_PROFILER_H_
