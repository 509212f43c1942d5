// The ExecutionGraph: a Plan lowered to what a device runs. For each rank,
// every op of every job in issue order, placed on its named stream, with
// the instructions it must wait for. The multi-stream executor and the
// simulator interpret this same graph with the same rules:
//   - a stream runs its instructions in issue order (FIFO);
//   - an instruction starts once every instruction in `deps` has finished;
//   - a collective or send/recv meets its peers by (ring, sequence number).
#ifndef LOOM_SCHEDULER_EXECUTION_GRAPH_H_
#define LOOM_SCHEDULER_EXECUTION_GRAPH_H_

#include <map>
#include <string>
#include <vector>

#include "scheduler/plan.h"

namespace loom {

struct Instruction {
  int id = 0;          // index in RankGraph::instructions
  int job_index = 0;   // index in the rank's job list
  Job job;
  const Op* op = nullptr;  // in the RankPlan's program for `job`
  std::string stream;      // "calc" when the op names none
  // Instructions of the same rank that must finish first. Only cross-stream
  // dependencies are listed; a stream's own order is implicit.
  std::vector<int> deps;
  // Communication: the ring, and the index of this call among this rank's
  // calls on the ring (send/recv: among calls to / from the same peer).
  int ring = 0;
  int64_t comm_seq = -1;
  // A last_micro_batch_only op outside the last micro-batch: issued (it
  // keeps its place in the stream) but does nothing.
  bool skip = false;
  // Scope of the vars it touches: its micro-batch (persistables live in
  // the step scope, shared by all).
  int micro_batch = 0;
};

struct RankGraph {
  int rank = 0;
  RankCoords coords;
  int micro_batches = 1;
  std::vector<Instruction> instructions;  // issue order
  // Stream name -> its instructions, in issue order.
  std::map<std::string, std::vector<int>> streams;
};

struct ExecutionGraph {
  ParallelLayout layout;
  std::vector<RankGraph> ranks;
};

// Lowers every rank of the plan. Cross-stream dependencies come from data
// flow within a micro-batch's scope (read after write, write after read,
// write after write; persistables across all micro-batches), from the
// events passes recorded and waited on, and from issue order on each ring,
// so that every member of a group issues its collectives in the same order
// whatever streams they sit on. The plan must hold the programs for as long
// as the graph is used.
StatusOr<ExecutionGraph> LowerPlan(const Plan& plan);
StatusOr<RankGraph> LowerRank(const RankPlan& rank);

// "calc: F0:lookup_table F0:elementwise_add ...", one line per stream.
std::string RankGraphToString(const RankGraph& graph);

}  // namespace loom

#endif  // LOOM_SCHEDULER_EXECUTION_GRAPH_H_
