// The simulator: an event-driven interpreter of an ExecutionGraph under the
// executor's rules, with instruction times from an injected timer.
//
//   - each stream runs its instructions in issue order, one at a time;
//   - an instruction arrives when its stream is free and every instruction
//     in its `deps` has finished;
//   - a compute instruction (or a no-op) starts when it arrives;
//   - a collective starts when every member of its group has arrived at
//     its call (same ring, same sequence number), and a send and its recv
//     start together, when both have arrived (Gloo's unbound-buffer send
//     waits for the receiver); the stream is held while it waits, as a
//     blocked communicator call holds the executor's stream thread;
//   - an instruction ends `timer.Seconds()` after it starts (a
//     communication: `timer.CommSeconds()`, told how long its first party
//     waited for the last and how long its parties' links had been idle:
//     a rank's link is busy while any of its communication runs), unless it
//     computes on cores its rank shares with others (InstructionTimer::
//     CorePool): then the pool's cores go to its running compute
//     instructions in stream-priority order, equal priorities sharing
//     equally, no instruction faster than one core, all of them slowed by
//     CommSlowdown while communication runs in the pool and by
//     SharedCoreSlowdown while another rank's compute shares its cores;
//     communication in the pool is slowed by ComputeCommSlowdown while its
//     compute takes every core; an instruction ends when its work is done
//     at the rates it got.
//
// One event queue of (time, sequence) with a deterministic tie-break, so
// two runs give the same trace. With the zero timer the simulation is the
// plan verifier's deadlock proof: if instructions are left when no event
// is, the error follows the chain of waits from the lowest blocked rank.
//
// Metrics (per rank, then over ranks):
//   step time            when the rank's last instruction ends; the step's
//                        is the latest over ranks;
//   busy time per stream the sum of its instructions' spans from start to
//                        end (a collective's wait for its members is not
//                        busy time: the stream is held but idle);
//   bubble fraction      1 - (time the calc stream computes) / step time;
//                        overall: the mean over ranks;
//   exposed comm         per kind (mp, dp, p2p, sharding; by the ring an
//                        instruction communicates on), the time in which an
//                        instruction of that kind runs (started, not
//                        waiting for its parties: that wait is a bubble or
//                        imbalance, not communication) and no compute
//                        instruction runs on the rank; overall: the mean
//                        over ranks.
//   peak memory          persistables plus the peak of live temporaries,
//                        per rank (see RankMetrics).
// Trace events span start to end, like busy time.
#ifndef LOOM_SCHEDULER_SIMULATOR_H_
#define LOOM_SCHEDULER_SIMULATOR_H_

#include <array>
#include <limits>
#include <string>
#include <vector>

#include "scheduler/execution_graph.h"
#include "scheduler/timeline_metrics.h"
#include "scheduler/trace.h"

namespace loom {

// What the simulator knows of a communication as it starts.
struct CallStart {
  // How long its first party waited for the last.
  double waited = 0;
  // How long its parties' links had carried nothing, the least over them:
  // 0 when a party communicates on another stream or a call of its just
  // ended; infinite when none has communicated yet this step.
  double link_idle = 0;
  // Where every party's core computes as the call starts, how long that
  // compute goes on at its present rates (the longest op on each core, the
  // most over the parties); -1 when a party's core idles or the ranks'
  // cores are not modelled (InstructionTimer::CorePool).
  double cores_busy_for = -1;
  // Whether another rank's communication runs in a party's core pool as
  // the call starts (InstructionTimer::CorePool; false where not modelled),
  // and how long the longest of those goes on at its present rate
  // (infinite: a caller that does not say is taken to mean all along).
  bool beside_other_calls = false;
  double other_calls_for = std::numeric_limits<double>::infinity();
};

// Prices instructions for the simulator. Implemented by the cost model;
// tests use simple timers with named constants.
class InstructionTimer {
 public:
  virtual ~InstructionTimer() = default;
  // Seconds `ins` of `rank` runs once it starts (a collective or a
  // transfer: once every party has arrived), alone on its device.
  virtual double Seconds(const RankGraph& rank, const Instruction& ins) const = 0;
  // The same for a collective or transfer as it starts: a timer may price
  // the wake-up of parties that slept, or a link's shaper whose bucket
  // refilled while it idled. By default neither changes anything.
  virtual double CommSeconds(const RankGraph& rank, const Instruction& ins,
                             const CallStart& call) const {
    return Seconds(rank, ins);
  }

  // Shared cores. Ranks whose compute draws on one pool of cores (ranks
  // emulated on one CPU host) name the same pool; -1: the rank's streams
  // compute side by side at full rate (a GPU's streams).
  virtual int CorePool(const RankGraph& rank) const { return -1; }
  virtual double PoolCores(int pool) const { return 1; }
  // While communication of the pool's ranks runs, its compute runs up to
  // this many times slower (>= 1): on a CPU host the communication threads
  // take cycles from the kernels.
  virtual double CommSlowdown(int pool) const { return 1; }
  // The other way: while every core of the pool computes, its ranks'
  // communication runs up to this many times slower (>= 1): its threads
  // wait for a core.
  virtual double ComputeCommSlowdown(int pool) const { return 1; }
  // Compute of a rank that shares the pool's cores with another rank's
  // compute (more tasks than cores, of two ranks or more) runs this many
  // times slower again: the OS runs them a slice at a time, so each
  // reaches its next meeting early or late, and its peer waits for the
  // later one.
  virtual double SharedCoreSlowdown(int pool) const { return 1; }
  // The part of a call's time (0 to 1) its threads spend moving bytes on
  // the pool's cores, as it starts (`call`); the rest is latency (wakeups, the wire), which takes
  // no core. Both slowdowns scale with it: a call that copies for a fifth
  // of its time slows compute by a fifth of CommSlowdown's excess, and is
  // slowed by a fifth of ComputeCommSlowdown's.
  virtual double CommCpuShare(const RankGraph& rank, const Instruction& ins,
                              const CallStart& call) const {
    return 1;
  }
  // The CPU seconds each party's threads spend on its core over a call
  // (the calling thread, the transport's, the kernel's on their behalf).
  // Where a pool's ranks outnumber its cores, a call takes that much of its
  // party's core, evenly over its time, from the pool's compute (in place
  // of CommSlowdown); 0: unknown, CommSlowdown prices it.
  virtual double CommCpuSeconds(const RankGraph& rank, const Instruction& ins) const {
    return 0;
  }
  // How far past the op in flight CallStart::cores_busy_for follows a
  // core's compute stream (its next ops, until one waits for another
  // stream): 0, the op in flight only.
  virtual double CoreRunHorizon() const { return 0; }
  // A send that returns once its recv is posted and its bytes are in the
  // transport's buffers (Gloo over TCP: the receiver says it is ready, the
  // sender writes into its socket): the seconds its stream takes from the
  // rendezvous, while the recv takes the transfer. < 0: the send takes the
  // transfer too, its buffer held until the bytes arrive (NCCL's).
  virtual double SendHandOverSeconds(const RankGraph& rank, const Instruction& send) const {
    return -1;
  }
  // How many times longer `ins` takes beside another rank's call on its
  // shared cores than apart (>= 1), as it starts (`call`): a call already
  // running is slowed so for as long as a later one overlaps it.
  virtual double BesideCallsSlowdown(const RankGraph& rank, const Instruction& ins,
                                     const CallStart& call) const {
    return 1;
  }
};

// Every instruction takes no time: the deadlock proof.
class ZeroTimer : public InstructionTimer {
 public:
  double Seconds(const RankGraph&, const Instruction&) const override { return 0; }
};

struct StreamMetrics {
  std::string name;
  double busy_s = 0;
  int instructions = 0;
};

struct RankMetrics {
  int rank = 0;
  // Memory: persistables for the whole step, plus the most temporaries
  // (activations kept for the backward, gradients, workspaces) live at
  // once, each from the start of the instruction that first writes it to
  // the end of the last that touches it.
  PersistentBytes persistent;
  int64_t peak_temporary_bytes = 0;
  // The temporaries live at that peak, by what they hold (MemoryKind).
  std::array<int64_t, kNumMemoryKinds> peak_temporaries_by_kind{};
  // The rank's layers and how many its backward makes again
  // (RankGraphBody::layers).
  int layers = 0;
  int recomputed_layers = 0;
  int64_t peak_bytes() const { return persistent.total() + peak_temporary_bytes; }
  double step_time_s = 0;
  double calc_compute_s = 0;
  double bubble_fraction = 0;
  std::array<double, kNumCommCategories> exposed_comm_s{};
  std::vector<StreamMetrics> streams;
};

struct SimulationResult {
  double step_time_s = 0;
  double bubble_fraction = 0;
  std::array<double, kNumCommCategories> exposed_comm_s{};
  std::vector<RankMetrics> ranks;  // in the graph's rank order
  std::vector<TraceEvent> trace;   // when asked for; times in ns from 0
  int64_t instructions = 0;        // instructions simulated, over all ranks
  int64_t rendezvous = 0;          // collective calls and transfers matched
  int ranks_simulated = 0;         // fewer than ranks when dp or mp was folded

  // The rank with the highest peak memory (the first such); needs ranks.
  const RankMetrics& PeakRank() const;
};

struct SimulationOptions {
  const InstructionTimer* timer = nullptr;  // nullptr: ZeroTimer
  bool trace = false;
  bool metrics = true;  // off: only deadlock freedom and counts
  // Simulate only the dp=0 replica of each (pp, mp) position when every
  // replica shares its body (the same programs and jobs): replicas then
  // run identical timelines, so a dp collective starts when the replica
  // simulated arrives, and the others' metrics are its. Exact only when
  // the timer prices an instruction the same on every replica (a
  // homogeneous cluster whose groups span the same link levels, and no
  // cores shared between ranks). Ignored when a replica's body differs.
  bool fold_data_parallel = false;
  // The same for the tensor-parallel peers of a stage, when they share
  // one body (PlanOptions::share_tensor_parallel_ranks plans one rank a
  // stage for all): they run the same ops on the same link, so an mp
  // collective starts when the peer simulated arrives. Exact under the
  // same conditions as fold_data_parallel; ignored otherwise.
  bool fold_tensor_parallel = false;
};

// Simulates one step of every rank of the graph. Fails (FailedPrecondition,
// "deadlock: ...") when the ranks cannot all finish, and with
// InvalidArgument when an instruction names a group the rank does not have
// or a peer outside the graph.
StatusOr<SimulationResult> Simulate(const ExecutionGraph& graph,
                                    const SimulationOptions& options = {});

}  // namespace loom

#endif  // LOOM_SCHEDULER_SIMULATOR_H_
