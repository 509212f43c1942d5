// The ExecutionGraph: a Plan lowered to what a device runs. For each rank,
// every op of every job in issue order, placed on its named stream, with
// the instructions it must wait for. The multi-stream executor and the
// simulator interpret this same graph with the same rules:
//   - a stream runs its instructions in issue order (FIFO);
//   - an instruction starts once every instruction in `deps` has finished;
//   - a collective starts once every member of its group has reached it,
//     and a send and its recv start together (Gloo's unbound-buffer send
//     waits for the receiver), matched by (ring, sequence number).
//
// The graph describes itself: each instruction carries its kind, stream and
// priority, the work it does and the bytes it moves, so that the simulator
// and the cost model need neither the executor nor the Plan. The executor
// finds an instruction's op through (job, op_index) in the rank's plan.
//
// Ranks that differ only in their dp coordinate run the same programs and
// job list, so they share one lowered body; what differs (the global ranks
// of each group, the peer of each transfer) is resolved per rank.
#ifndef LOOM_SCHEDULER_EXECUTION_GRAPH_H_
#define LOOM_SCHEDULER_EXECUTION_GRAPH_H_

#include <array>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "framework/op_registry.h"
#include "framework/op_work.h"
#include "scheduler/plan.h"

namespace loom {

enum class InstructionKind : uint8_t {
  kCompute,     // a kernel on this rank
  kCollective,  // with every member of its group (may compute too)
  kSend,        // to its peer
  kRecv,        // from its peer
  kNoOp,        // keeps its place in its stream and does nothing
};
// "compute", "collective", "send", "recv", "noop".
const char* InstructionKindName(InstructionKind kind);

struct Instruction {
  int id = 0;         // index in the body's instructions
  int job_index = 0;  // index in the rank's job list
  Job job;
  int op_index = 0;   // index of the op in the job program's global block
  std::string op_type;
  InstructionKind kind = InstructionKind::kCompute;
  int stream = 0;     // index into RankGraphBody::streams
  int stream_priority = 0;  // higher runs first where streams compete
  // Instructions of the same rank that must finish first. Only cross-stream
  // dependencies are listed; a stream's own order is implicit.
  std::vector<int> deps;
  // Scope of the vars it touches: its micro-batch (persistables live in
  // the step scope, shared by all).
  int micro_batch = 0;

  // Indexes RankGraphBody::signatures (the cost table's key) and
  // signature_work: ops alike are priced alike.
  int signature = 0;

  // Communication. ring: the group kind (RankGraph::Group gives its global
  // ranks); peer_stage: a transfer's peer (RankGraph::Peer gives its rank);
  // comm_seq: the index of this call among this rank's calls on the ring
  // (send/recv: among its calls to / from the same peer).
  RingId ring = kMpRing;
  // What the call moves (the op schema's), and whether the op computes
  // around it (the vocabulary-parallel cross entropy).
  CommCall call = CommCall::kNone;
  bool computes_around_call = false;
  int peer_stage = -1;
  int64_t comm_seq = -1;
  int64_t comm_bytes = 0;  // bytes this rank contributes to one call
  int comm_calls = 0;      // calls per run (3 for the vocab-parallel CE)

  // Temporaries it touches: RankGraphBody::touches[touches_begin, +count).
  // The first `allocs` of them it writes first in the step, so it
  // allocates them. The last `releases` it does not use: it holds them
  // until it starts, and lets them go before it allocates (a gradient
  // bucket held until the bucket its reduce-scatter bounds begins, so that
  // when it is freed does not depend on timing). A temporary is freed once
  // every instruction touching it has finished, or started for those it
  // releases, whichever is last.
  int touches_begin = 0;
  int touches_count = 0;
  int allocs = 0;
  int releases = 0;
  // The touches it uses, up to where its releases begin.
  int uses_end() const { return touches_begin + touches_count - releases; }

  bool communicates() const {
    return kind == InstructionKind::kCollective ||
           kind == InstructionKind::kSend || kind == InstructionKind::kRecv;
  }
};

// One named stream of a rank: its instructions in issue order.
struct StreamQueue {
  std::string name;          // "calc", "mp", "dp", "p2p_send", ...
  std::vector<int> queue;    // instruction ids, issue order
};

// What a temporary holds, for the memory breakdown of a rank's peak.
enum class MemoryKind : uint8_t {
  kActivation,     // made by a forward job, kept for a backward job
  kParameterCopy,  // a low-precision copy of parameters (AMP's cast)
  kGradient,       // a micro-batch's gradient ("@GRAD"), before it is summed
  kCommBuffer,     // received or gathered (ZeRO-3's buckets, ...)
  kWorkspace,      // the rest: made and used within a job
};
inline constexpr int kNumMemoryKinds = 5;

// A non-persistable var of one micro-batch's scope. Vars are named by
// index into RankGraphBody::var_names: every micro-batch has the same.
struct Temporary {
  int micro_batch = 0;
  int var = 0;
  int64_t bytes = 0;
  int touched_by = 0;  // instructions that touch it in a step
  // Read before any instruction writes it: fed before the step (data).
  bool fed = false;
  // Vars of the micro-batch that view this one's data (outputs of view ops,
  // OpSchema::ViewOf): they share its buffer, so it lives until the last
  // toucher of any of them, and they are freed with it.
  std::vector<int> views = {};
  MemoryKind kind = MemoryKind::kWorkspace;
};

// Bytes of the persistable vars: they live for the whole run.
struct PersistentBytes {
  int64_t parameters = 0;
  // The fp32 parameters of a plan that computes with low-precision copies
  // of them (AMP): counted here instead of in `parameters`.
  int64_t master_weights = 0;
  int64_t gradients = 0;        // accumulators ("@GRAD" in the name)
  int64_t optimizer_state = 0;  // every other persistable (moments, ...)
  int64_t total() const { return parameters + master_weights + gradients + optimizer_state; }
};

// What ranks sharing a program set share: instructions and streams.
struct RankGraphBody {
  int micro_batches = 1;
  int num_chunks = 1;
  std::vector<Instruction> instructions;  // issue order
  std::vector<StreamQueue> streams;            // sorted by name
  std::vector<std::string> signatures;
  // By signature: the op's work, counted from its shapes
  // (framework/op_work.h); the signature names every shape the count reads.
  std::vector<OpWork> signature_work;
  std::vector<std::string> var_names;  // what Temporary::var and views index
  std::vector<Temporary> temporaries;
  std::vector<int> touches;  // temporary ids, by instruction (see there)
  PersistentBytes persistent;
  // Transformer layers (OpDesc.layer) the rank's forward runs, and how many
  // of them its backward makes again (the recompute pass's copies).
  int layers = 0;
  int recomputed_layers = 0;

  // The index of stream `name`, or -1.
  int FindStream(const std::string& name) const;
  const OpWork& Work(const Instruction& ins) const { return signature_work[ins.signature]; }
  // Whether the instruction's time has a compute part: a kernel, or an op
  // that computes and communicates (the vocabulary-parallel cross entropy,
  // whose reductions the communication model prices).
  bool Computes(const Instruction& ins) const {
    return ins.kind == InstructionKind::kCompute ||
           (ins.kind == InstructionKind::kCollective && Work(ins).flops > 0);
  }
};

struct RankGraph {
  int rank = 0;
  RankCoords coords;
  std::shared_ptr<const RankGraphBody> body;
  // Global ranks of each ring's group, in group-rank order, indexed by
  // RingId; empty where the rank has no such group.
  std::array<std::vector<int>, kNumRingIds> groups;
  // Global rank at each pipeline stage with this rank's dp and mp.
  std::vector<int> stage_ranks;

  const std::vector<Instruction>& instructions() const { return body->instructions; }
  const std::vector<StreamQueue>& streams() const { return body->streams; }
  int micro_batches() const { return body->micro_batches; }
  const std::vector<int>& Group(const Instruction& ins) const { return groups[ins.ring]; }
  int Peer(const Instruction& ins) const { return stage_ranks.at(ins.peer_stage); }
  const std::string& StreamName(const Instruction& ins) const {
    return body->streams[ins.stream].name;
  }
};

struct ExecutionGraph {
  ParallelLayout layout;
  std::vector<RankGraph> ranks;  // the plan's ranks, in its order
};

// Lowers every rank of the plan; ranks with the same program set and job
// list share one body. Cross-stream dependencies come from data flow
// within a micro-batch's scope (read after write, write after read, write
// after write; persistables across all micro-batches), from the events
// passes recorded and waited on, and from issue order on each ring, so
// that every member of a group issues its collectives in the same order
// whatever streams they sit on.
StatusOr<ExecutionGraph> LowerPlan(const Plan& plan);
StatusOr<RankGraph> LowerRank(const RankPlan& rank, const ParallelLayout& layout);

// Names the call a communicating instruction takes part in, the same on
// every party: a collective by (ring, its group's first rank, sequence
// number), a transfer by (minus its ring, sender, receiver, sequence number:
// each of the pipeline's rings numbers its transfers apart).
struct RendezvousId {
  int ring = 0;
  int a = 0, b = 0;
  int64_t seq = 0;
  bool operator==(const RendezvousId& o) const {
    return ring == o.ring && a == o.a && b == o.b && seq == o.seq;
  }
  bool operator<(const RendezvousId& o) const {
    return std::tie(ring, a, b, seq) < std::tie(o.ring, o.a, o.b, o.seq);
  }
};
// `ins` must communicate, its group be resolved and its peer stage valid.
RendezvousId RendezvousOf(const RankGraph& graph, const Instruction& ins);

// Whether `names` holds the temporary's var or a view of it: how the
// executor's kept vars (RankExecutorOptions::keep) find their buffers.
bool NamesTemporary(const RankGraphBody& body, const Temporary& temp,
                    const std::set<std::string>& names);

// "rank 3 (dp=0 mp=1 pp=1), job 5 (B2), op 17 (matmul_grad)": where an
// instruction is, for errors.
std::string InstructionLocation(const RankGraph& graph, const Instruction& ins);

}  // namespace loom

#endif  // LOOM_SCHEDULER_EXECUTION_GRAPH_H_
