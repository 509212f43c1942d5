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
//     computes on cores its rank shares with others (SharedCoreModel::
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
#include "scheduler/instruction_timer.h"
#include "scheduler/shared_core_model.h"
#include "scheduler/timeline_metrics.h"
#include "scheduler/trace.h"

namespace loom {

struct StreamMetrics {
  std::string name;
  double busy_s = 0;
  int instructions = 0;
};

struct RankMetrics {
  int rank = 0;
  // Memory: persistables for the whole step, plus the most temporaries
  // (activations kept for the backward, gradients, workspaces) live at
  // once, each from the arrival of the instruction that first writes it
  // (a call's, before its peers join) to the end of the last that touches
  // it.
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
  // How ranks take shared cores from each other; nullptr: the timer's own
  // (InstructionTimer::shared_cores), null for a GPU cluster's, whose
  // streams compute side by side at full rate.
  const SharedCoreModel* shared_cores = nullptr;
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
