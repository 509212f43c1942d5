// The simulator's state, shared by its event loop (simulator.cc) and its
// deadlock report (simulator_deadlock.cc). Internal to scheduler/.
#ifndef LOOM_SCHEDULER_SIMULATION_STATE_H_
#define LOOM_SCHEDULER_SIMULATION_STATE_H_

#include <limits>
#include <memory>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "scheduler/simulator.h"

namespace loom {
namespace simulator_internal {

// How many (rank, stream) steps a deadlock message follows.
constexpr int kMaxReportedWaits = 4;

constexpr double kNsPerSecond = 1e9;

struct Event {
  double time;
  uint64_t seq;  // tie-break: the order events were made
  int rank;      // index into graph.ranks
  int ins;
  uint32_t version;  // stale when the stream's version moved on
  bool operator>(const Event& o) const {
    return time != o.time ? time > o.time : seq > o.seq;
  }
};

using RendezvousKey = RendezvousId;

struct RendezvousKeyHash {
  size_t operator()(const RendezvousKey& k) const {
    uint64_t h = static_cast<uint64_t>(k.seq) * 0x9E3779B97F4A7C15ull;
    h ^= (static_cast<uint64_t>(k.a) << 32 | static_cast<uint32_t>(k.b)) + 0x7F4A7C15ull + (h << 6) + (h >> 2);
    h ^= static_cast<uint64_t>(k.ring) + (h << 6) + (h >> 2);
    return static_cast<size_t>(h);
  }
};

// A collective call or a transfer, until every party has arrived.
struct Rendezvous {
  int size = 0;
  std::vector<std::pair<int, int>> arrived;  // (rank index, instruction)
  double first = 0;  // when the first party arrived
};

struct StreamState {
  size_t pos = 0;          // next instruction in the queue
  bool busy = false;       // an instruction has arrived and not ended
  int waiting_on = -1;     // an unfinished dependency of the head
  bool in_rendezvous = false;  // the head waits for its other parties
  RendezvousKey rendezvous;
  double start = 0;        // when the instruction in flight started
  // When it arrived: its dependencies done, it allocated its outputs, as
  // the executor does; a call's party then waits for the others to start.
  double arrived = 0;
  // Shared cores: the work left (seconds at one core's rate), the rate
  // since `since`, and the version of its pending finish event.
  double remaining = 0;
  double rate = 1;
  double since = 0;
  uint32_t version = 0;
  // Of the communication running: its CPU share, the part of a core it
  // takes from the pool's compute (SharedCoreModel::CommCpuSeconds over
  // its time; 0: its cpu_share counts in Pool::copying instead), and when
  // it ends at its present rate.
  double cpu_share = 0;
  double core_taken = 0;
  double end = 0;
  double beside_slowdown = 1;  // SharedCoreModel::BesideCallsSlowdown
  double link_credit_after = 0;  // InstructionTimer::LinkCreditAfter
  // Where ranks share cores: (rank index, instruction) of every party of
  // the call in flight, this one included (a send that handed its bytes
  // over may have finished), one list per call.
  std::shared_ptr<const std::vector<std::pair<int, int>>> parties;
};

// Cores shared by the compute of several ranks.
struct Pool {
  double cores = 1;
  int ranks = 0;  // whose compute draws on the pool
  double slowdown = 1;          // of compute, while communication runs
  double comm_slowdown = 1;     // of communication, while compute fills the cores
  double shared_slowdown = 1;   // of compute, while another rank's shares its cores
  // The CPU shares (SharedCoreModel::CommCpuShare) of the calls in flight,
  // summed.
  double copying = 0;
  // The cores the calls in flight take from compute (core_taken, summed):
  // where more ranks share the pool than it has cores, calls whose CPU
  // the timer knows take it so, in place of `slowdown`.
  double calls_cpu = 0;
  std::vector<std::pair<int, int>> tasks;  // (rank index, stream), computing
  // (rank index, stream) of every call in flight, and of those whose end
  // Reprice moves with the pool's compute (comm_slowdown > 1).
  std::vector<std::pair<int, int>> calls;
  std::vector<std::pair<int, int>> comms;
};

struct RankState {
  const RankGraph* graph = nullptr;
  int pool = -1;  // index into Simulation::pools_, or -1
  std::vector<StreamState> streams;
  std::vector<char> done;
  int calc = -1;  // index of the calc stream
  // The rank's link: its communication in flight, when the last ended
  // (-inf: none yet, the link idle since long before the step), and what
  // that call left it to carry over (CallStart::link_credit).
  int link_calls = 0;
  double link_idle_since = -std::numeric_limits<double>::infinity();
  double link_credit = 0;
  // Until when bytes of sends that returned once handed over still queue
  // on the link (InstructionTimer::LinkQueuesHandedOverBytes).
  double queued_until = -std::numeric_limits<double>::infinity();
  // Metrics, accumulated as events pass.
  RankAccounting accounting;
  // Memory: touches left per temporary, and the bytes live now.
  std::vector<int> touches_left;
  int64_t live_bytes = 0;
  std::array<int64_t, kNumMemoryKinds> live_by_kind{};
  RankMetrics metrics;
};

// A temporary comes to life on rank `st`.
inline void Allocate(RankState& st, const Temporary& temp) {
  st.live_bytes += temp.bytes;
  st.live_by_kind[static_cast<int>(temp.kind)] += temp.bytes;
}

// One of the temporary's touches is done; the last frees it.
inline void Untouch(RankState& st, const RankGraphBody& body, int t) {
  if (--st.touches_left[t] != 0) return;
  const Temporary& temp = body.temporaries[t];
  st.live_bytes -= temp.bytes;
  st.live_by_kind[static_cast<int>(temp.kind)] -= temp.bytes;
}

class Simulation {
 public:
  Simulation(const ExecutionGraph& graph, const SimulationOptions& options)
      : graph_(graph), options_(options) {
    static const ZeroTimer zero;
    timer_ = options.timer != nullptr ? options.timer : &zero;
    cores_ = options.shared_cores != nullptr ? options.shared_cores : timer_->shared_cores();
  }

  StatusOr<SimulationResult> Run();

 private:
  // Whether every rank's representative (Representative) is in the graph
  // with the same body, when dp replicas (`dp`) and mp peers (`mp`) fold.
  bool CanFold(bool dp, bool mp) const;
  // The rank simulated for `g`: itself, or the dp=0 replica and mp=0 peer
  // of its stage where those fold.
  int Representative(const RankGraph& g) const;
  Status Init();
  // Starts what the head of stream `s` of rank `r` can start at `now`.
  Status Advance(int r, int s, double now);
  Status Arrive(int r, int s, const Instruction& ins, double now);
  // `call`: for a communication, what its timer is told; `priced` >= 0
  // prices it instead (a send's hand-over).
  void Start(int r, int ins, double now, const CallStart& call = {}, double priced = -1);
  // What a call's timer is told as the last of `rv`'s parties arrives at
  // `now`; adds the parties of other ranks' calls on their cores to
  // `beside`, once per call.
  CallStart CallStartOf(const Rendezvous& rv, double now,
                        std::vector<const std::vector<std::pair<int, int>>*>* beside) const;
  // CallStart::cores_busy_for of the rendezvous `rv` completing at `now`.
  double CoresBusyFor(const Rendezvous& rv, double now) const;
  // The compute stream `s` of rank `r` runs after its op in flight without
  // blocking on another stream (seconds at one core's rate), looked at up
  // to `horizon`.
  double ComputeRunAfter(int r, int s, double horizon) const;
  // Gives the pool's running compute its rates from `now` and reschedules
  // their ends.
  void Reprice(int pool, double now);
  // The call in flight on `parties` is slowed by a call that joined it on
  // its cores at `now` and runs until `until`.
  void SlowBeside(const std::vector<std::pair<int, int>>& parties, double now, double until);
  // Moves the end of the call running on (rank index r, stream s) `extra`
  // seconds later.
  void ExtendCall(int r, int s, double now, double extra);
  // After a transfer `rv` started: where its send returned once handed
  // over and its link queues bytes, they hold the sender's link until its
  // recv ends, and the sender's calls in flight take that much longer.
  void QueueHandedOverBytes(const Rendezvous& rv, double now);
  void Finish(const Event& e);
  // An instruction starts (delta +1) or ends (-1) at t, for the metrics.
  void Count(RankState& st, const Instruction& ins, double t, int delta);
  // The rendezvous `ins` of rank `r` joins, and its number of parties.
  StatusOr<RendezvousKey> KeyOf(int r, const Instruction& ins, int* size) const;
  Status Deadlock() const;
  std::string DescribeWait(int r, int s, int* next_r, int* next_s) const;
  int IndexOfRank(int global) const {
    auto it = index_of_.find(global);
    return it == index_of_.end() ? -1 : it->second;
  }

  const ExecutionGraph& graph_;
  const SimulationOptions& options_;
  const InstructionTimer* timer_;
  // Some send's link queues the bytes it hands over
  // (InstructionTimer::LinkQueuesHandedOverBytes).
  bool queues_ = false;
  // Null: no rank shares cores, and there are no pools_.
  const SharedCoreModel* cores_;
  bool fold_dp_ = false;  // only dp=0 replicas are simulated
  bool fold_mp_ = false;  // only mp=0 peers are simulated
  std::vector<Pool> pools_;
  std::vector<RankState> ranks_;
  std::unordered_map<int, int> index_of_;  // global rank -> index
  std::unordered_map<RendezvousKey, Rendezvous, RendezvousKeyHash> rendezvous_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  uint64_t seq_ = 0;
  SimulationResult result_;
};

}  // namespace simulator_internal
}  // namespace loom

#endif  // LOOM_SCHEDULER_SIMULATION_STATE_H_
