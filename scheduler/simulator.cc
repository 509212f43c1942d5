#include "scheduler/simulator.h"

#include <algorithm>
#include <queue>
#include <unordered_map>

namespace loom {
namespace {

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
  // Shared cores: the work left (seconds at one core's rate), the rate
  // since `since`, and the version of its pending finish event.
  double remaining = 0;
  double rate = 1;
  double since = 0;
  uint32_t version = 0;
};

// Cores shared by the compute of several ranks.
struct Pool {
  double cores = 1;
  double slowdown = 1;          // of compute, while communication runs
  double comm_slowdown = 1;     // of communication, while compute fills the cores
  int communicating = 0;
  std::vector<std::pair<int, int>> tasks;  // (rank index, stream), computing
  std::vector<std::pair<int, int>> comms;  // (rank index, stream), communicating
};

struct RankState {
  const RankGraph* graph = nullptr;
  int pool = -1;  // index into Simulation::pools_, or -1
  std::vector<StreamState> streams;
  std::vector<char> done;
  int calc = -1;  // index of the calc stream
  // Metrics, accumulated as events pass.
  RankAccounting accounting;
  // Memory: touches left per temporary, and the bytes live now.
  std::vector<int> touches_left;
  int64_t live_bytes = 0;
  RankMetrics metrics;
};

class Simulation {
 public:
  Simulation(const ExecutionGraph& graph, const SimulationOptions& options)
      : graph_(graph), options_(options) {
    static const ZeroTimer zero;
    timer_ = options.timer != nullptr ? options.timer : &zero;
  }

  StatusOr<SimulationResult> Run();

 private:
  // True when every dp replica shares its dp=0 peer's body.
  bool CanFold() const;
  Status Init();
  // Starts what the head of stream `s` of rank `r` can start at `now`.
  Status Advance(int r, int s, double now);
  Status Arrive(int r, int s, const Instruction& ins, double now);
  // `waited`: for a communication, how long its first party waited.
  void Start(int r, int ins, double now, double waited = 0);
  // Gives the pool's running compute its rates from `now` and reschedules
  // their ends.
  void Reprice(int pool, double now);
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
  bool folded_ = false;  // only dp=0 replicas are simulated
  std::vector<Pool> pools_;
  std::vector<RankState> ranks_;
  std::unordered_map<int, int> index_of_;  // global rank -> index
  std::unordered_map<RendezvousKey, Rendezvous, RendezvousKeyHash> rendezvous_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  uint64_t seq_ = 0;
  SimulationResult result_;
};

bool Simulation::CanFold() const {
  std::unordered_map<int, const RankGraph*> by_rank;
  for (const RankGraph& g : graph_.ranks) by_rank[g.rank] = &g;
  for (const RankGraph& g : graph_.ranks) {
    auto it = by_rank.find(graph_.layout.Rank(RankCoords{0, g.coords.mp, g.coords.pp}));
    if (it == by_rank.end() || it->second->body != g.body) return false;
  }
  return true;
}

Status Simulation::Init() {
  std::unordered_map<int, int> seen;
  for (size_t i = 0; i < graph_.ranks.size(); ++i) {
    if (!seen.emplace(graph_.ranks[i].rank, static_cast<int>(i)).second) {
      return InvalidArgument("simulator: rank ", graph_.ranks[i].rank,
                             " appears twice in the graph");
    }
  }
  std::unordered_map<int, int> pool_index;  // timer's pool id -> pools_
  bool pooled = false;
  for (const RankGraph& g : graph_.ranks) pooled |= timer_->CorePool(g) >= 0;
  // Ranks that share cores slow each other down: replicas no longer time
  // alike.
  folded_ = options_.fold_data_parallel && !pooled && graph_.layout.dp > 1 && CanFold();
  for (size_t i = 0; i < graph_.ranks.size(); ++i) {
    const RankGraph& g = graph_.ranks[i];
    if (folded_ && g.coords.dp != 0) continue;
    index_of_[g.rank] = static_cast<int>(ranks_.size());
    ranks_.emplace_back();
    RankState& st = ranks_.back();
    st.graph = &g;
    const int pool = timer_->CorePool(g);
    if (pool >= 0) {
      auto [it, fresh] = pool_index.emplace(pool, static_cast<int>(pools_.size()));
      if (fresh) {
        Pool p;
        p.cores = timer_->PoolCores(pool);
        p.slowdown = timer_->CommSlowdown(pool);
        p.comm_slowdown = timer_->ComputeCommSlowdown(pool);
        if (!(p.cores > 0) || !(p.slowdown >= 1) || !(p.comm_slowdown >= 1)) {
          return InvalidArgument("simulator: core pool ", pool, " of rank ", g.rank, " has ",
                                 p.cores, " cores and slowdowns of ", p.slowdown, " and ",
                                 p.comm_slowdown, "; need cores > 0 and slowdowns >= 1");
        }
        pools_.push_back(p);
      }
      st.pool = it->second;
    }
    st.streams.resize(g.streams().size());
    st.done.assign(g.instructions().size(), 0);
    st.calc = g.body->FindStream(stream::kCalc);
    st.metrics.rank = g.rank;
    st.metrics.persistent = g.body->persistent;
    if (options_.metrics) {
      st.touches_left.resize(g.body->temporaries.size());
      for (size_t t = 0; t < g.body->temporaries.size(); ++t) {
        const Temporary& temp = g.body->temporaries[t];
        st.touches_left[t] = temp.touched_by;
        if (temp.fed) st.live_bytes += temp.bytes;
      }
      st.metrics.peak_temporary_bytes = st.live_bytes;
    }
    for (const Stream& s : g.streams()) {
      st.metrics.streams.push_back(StreamMetrics{s.name, 0, 0});
    }
  }
  return Status::OK();
}

StatusOr<RendezvousKey> Simulation::KeyOf(int r, const Instruction& ins, int* size) const {
  const RankGraph& g = *ranks_[r].graph;
  if (ins.kind == InstructionKind::kCollective) {
    const std::vector<int>& group = g.Group(ins);
    if (group.empty()) {
      return InvalidArgument(InstructionLocation(g, ins), ": rank ", g.rank, " has no ",
                             RingName(ins.ring), " group");
    }
    if (folded_ && ins.ring == kDpRing) {
      // The replicas not simulated arrive when this one does.
      *size = 1;
      return RendezvousKey{static_cast<int>(ins.ring), g.rank, 0, ins.comm_seq};
    }
    for (int m : group) {
      if (IndexOfRank(m) < 0) {
        return InvalidArgument(InstructionLocation(g, ins), ": its ", RingName(ins.ring),
                               " group includes rank ", m, ", which the graph does not hold");
      }
    }
    *size = static_cast<int>(group.size());
    return RendezvousOf(g, ins);
  }
  if (ins.peer_stage < 0 || ins.peer_stage >= static_cast<int>(g.stage_ranks.size()) ||
      IndexOfRank(g.Peer(ins)) < 0) {
    return InvalidArgument(InstructionLocation(g, ins), ": peer stage ", ins.peer_stage,
                           " is not a rank of the graph");
  }
  *size = 2;
  return RendezvousOf(g, ins);
}

void Simulation::Count(RankState& st, const Instruction& ins, double t, int delta) {
  if (!options_.metrics) return;
  const bool calc = ins.stream == st.calc;
  const CommCategory comm = CommCategoryOf(ins);
  if (delta > 0) {
    st.accounting.Start(t, ins.kind, calc, comm);
  } else {
    st.accounting.End(t, ins.kind, calc, comm);
  }
}

void Simulation::Start(int r, int id, double now, double waited) {
  RankState& st = ranks_[r];
  const Instruction& ins = st.graph->instructions()[id];
  double seconds = 0;
  if (ins.communicates()) {
    seconds = timer_->CommSeconds(*st.graph, ins, waited);
  } else if (ins.kind != InstructionKind::kNoOp) {
    seconds = timer_->Seconds(*st.graph, ins);
  }
  Count(st, ins, now, +1);
  st.streams[ins.stream].start = now;
  if (options_.metrics) {
    const RankGraphBody& body = *st.graph->body;
    for (int i = 0; i < ins.allocs; ++i) {
      st.live_bytes += body.temporaries[body.touches[ins.touches_begin + i]].bytes;
    }
    st.metrics.peak_temporary_bytes = std::max(st.metrics.peak_temporary_bytes, st.live_bytes);
  }
  StreamState& ss = st.streams[ins.stream];
  if (st.pool >= 0 && ins.kind == InstructionKind::kCompute) {
    ss.remaining = seconds;
    ss.since = now;
    ss.rate = 0;
    pools_[st.pool].tasks.emplace_back(r, ins.stream);
    Reprice(st.pool, now);
    return;
  }
  if (st.pool >= 0 && ins.communicates()) {
    Pool& pool = pools_[st.pool];
    ++pool.communicating;
    if (pool.comm_slowdown > 1) {
      // Its end depends on the pool's compute: priced by Reprice.
      ss.remaining = seconds;
      ss.since = now;
      ss.rate = 0;
      pool.comms.emplace_back(r, ins.stream);
    }
    Reprice(st.pool, now);
    if (pool.comm_slowdown > 1) return;
  }
  events_.push(Event{now + seconds, seq_++, r, id, ++ss.version});
}

void Simulation::Reprice(int p, double now) {
  Pool& pool = pools_[p];
  auto priority = [&](const std::pair<int, int>& t) {
    const RankState& st = ranks_[t.first];
    const StreamState& ss = st.streams[t.second];
    return st.graph->instructions()[st.graph->streams()[t.second].queue[ss.pos]].stream_priority;
  };
  // Highest priority first; equal priorities in a fixed order.
  std::sort(pool.tasks.begin(), pool.tasks.end(), [&](const auto& a, const auto& b) {
    const int pa = priority(a), pb = priority(b);
    return pa != pb ? pa > pb : a < b;
  });
  const double slow = pool.communicating > 0 ? pool.slowdown : 1.0;
  double left = pool.cores;
  for (size_t i = 0; i < pool.tasks.size();) {
    size_t j = i;
    while (j < pool.tasks.size() && priority(pool.tasks[j]) == priority(pool.tasks[i])) ++j;
    const double share = std::min(1.0, std::max(0.0, left) / static_cast<double>(j - i));
    left -= share * static_cast<double>(j - i);
    for (size_t k = i; k < j; ++k) {
      const auto [r, s] = pool.tasks[k];
      StreamState& ss = ranks_[r].streams[s];
      ss.remaining = std::max(0.0, ss.remaining - (now - ss.since) * ss.rate);
      ss.since = now;
      ss.rate = share / slow;
      const int id = ranks_[r].graph->streams()[s].queue[ss.pos];
      // A task with no core left waits: it gets an end once one frees.
      if (ss.rate > 0) {
        events_.push(Event{now + ss.remaining / ss.rate, seq_++, r, id, ++ss.version});
      } else {
        ++ss.version;
      }
    }
    i = j;
  }
  // Communication waits for cores while compute takes them all.
  const double comm_rate =
      static_cast<double>(pool.tasks.size()) >= pool.cores ? 1.0 / pool.comm_slowdown : 1.0;
  for (const auto& [r, s] : pool.comms) {
    StreamState& ss = ranks_[r].streams[s];
    ss.remaining = std::max(0.0, ss.remaining - (now - ss.since) * ss.rate);
    ss.since = now;
    ss.rate = comm_rate;
    const int id = ranks_[r].graph->streams()[s].queue[ss.pos];
    events_.push(Event{now + ss.remaining / ss.rate, seq_++, r, id, ++ss.version});
  }
}

Status Simulation::Arrive(int r, int s, const Instruction& ins, double now) {
  RankState& st = ranks_[r];
  StreamState& ss = st.streams[s];
  ss.busy = true;
  if (!ins.communicates()) {
    Start(r, ins.id, now);
    return Status::OK();
  }
  int size = 0;
  LOOM_ASSIGN_OR_RETURN(RendezvousKey key, KeyOf(r, ins, &size));
  Rendezvous& rv = rendezvous_[key];
  rv.size = size;
  if (rv.arrived.empty()) rv.first = now;
  rv.arrived.emplace_back(r, ins.id);
  ss.in_rendezvous = true;
  ss.rendezvous = key;
  if (static_cast<int>(rv.arrived.size()) < size) return Status::OK();
  // The last party arrived now: every party starts.
  ++result_.rendezvous;
  for (const auto& [pr, pid] : rv.arrived) {
    RankState& p = ranks_[pr];
    p.streams[p.graph->instructions()[pid].stream].in_rendezvous = false;
    Start(pr, pid, now, now - rv.first);
  }
  rendezvous_.erase(key);
  return Status::OK();
}

Status Simulation::Advance(int r, int s, double now) {
  RankState& st = ranks_[r];
  StreamState& ss = st.streams[s];
  if (ss.busy) return Status::OK();
  const std::vector<int>& queue = st.graph->streams()[s].queue;
  if (ss.pos >= queue.size()) return Status::OK();
  const Instruction& ins = st.graph->instructions()[queue[ss.pos]];
  for (int d : ins.deps) {
    if (!st.done[d]) {
      ss.waiting_on = d;
      return Status::OK();
    }
  }
  ss.waiting_on = -1;
  return Arrive(r, s, ins, now);
}

void Simulation::Finish(const Event& e) {
  RankState& st = ranks_[e.rank];
  const Instruction& ins = st.graph->instructions()[e.ins];
  StreamState& ss = st.streams[ins.stream];
  Count(st, ins, e.time, -1);
  if (st.pool >= 0 && ins.kind == InstructionKind::kCompute) {
    auto& tasks = pools_[st.pool].tasks;
    tasks.erase(std::find(tasks.begin(), tasks.end(), std::make_pair(e.rank, ins.stream)));
  }
  if (st.pool >= 0 && ins.communicates()) {
    auto& comms = pools_[st.pool].comms;
    auto it = std::find(comms.begin(), comms.end(), std::make_pair(e.rank, ins.stream));
    if (it != comms.end()) comms.erase(it);
  }
  st.done[e.ins] = 1;
  ss.busy = false;
  ++ss.pos;
  ++result_.instructions;
  if (options_.metrics) {
    StreamMetrics& sm = st.metrics.streams[ins.stream];
    sm.busy_s += e.time - ss.start;
    ++sm.instructions;
    st.metrics.step_time_s = std::max(st.metrics.step_time_s, e.time);
    const RankGraphBody& body = *st.graph->body;
    for (int i = 0; i < ins.touches_count; ++i) {
      const int t = body.touches[ins.touches_begin + i];
      if (--st.touches_left[t] == 0) st.live_bytes -= body.temporaries[t].bytes;
    }
  }
  if (options_.trace) {
    result_.trace.push_back(TraceEventOf(*st.graph, ins,
                                         static_cast<int64_t>(ss.start * kNsPerSecond),
                                         static_cast<int64_t>(e.time * kNsPerSecond)));
  }
}

StatusOr<SimulationResult> Simulation::Run() {
  LOOM_RETURN_IF_ERROR(Init());
  for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
    for (int s = 0; s < static_cast<int>(ranks_[r].streams.size()); ++s) {
      LOOM_RETURN_IF_ERROR(Advance(r, s, 0));
    }
  }
  while (!events_.empty()) {
    const Event e = events_.top();
    events_.pop();
    RankState& st = ranks_[e.rank];
    const int s = st.graph->instructions()[e.ins].stream;
    if (e.version != st.streams[s].version) continue;  // rescheduled since
    Finish(e);
    if (st.pool >= 0) {
      const Instruction& ins = st.graph->instructions()[e.ins];
      if (ins.communicates()) --pools_[st.pool].communicating;
      if (ins.kind == InstructionKind::kCompute || ins.communicates()) Reprice(st.pool, e.time);
    }
    LOOM_RETURN_IF_ERROR(Advance(e.rank, s, e.time));
    for (int o = 0; o < static_cast<int>(st.streams.size()); ++o) {
      if (st.streams[o].waiting_on == e.ins) {
        LOOM_RETURN_IF_ERROR(Advance(e.rank, o, e.time));
      }
    }
  }
  LOOM_RETURN_IF_ERROR(Deadlock());

  for (RankState& st : ranks_) {
    RankMetrics& m = st.metrics;
    result_.step_time_s = std::max(result_.step_time_s, m.step_time_s);
  }
  const double n = std::max<size_t>(1, ranks_.size());
  for (RankState& st : ranks_) {
    RankMetrics& m = st.metrics;
    m.calc_compute_s = st.accounting.calc_compute_s();
    m.exposed_comm_s = st.accounting.exposed_comm_s();
    m.bubble_fraction = result_.step_time_s > 0
                            ? 1.0 - m.calc_compute_s / result_.step_time_s
                            : 0.0;
    result_.bubble_fraction += m.bubble_fraction / n;
    for (int c = 0; c < kNumCommCategories; ++c) {
      result_.exposed_comm_s[c] += m.exposed_comm_s[c] / n;
    }
  }
  // Every rank of the graph, in its order; a folded replica reports the
  // metrics of the one simulated.
  result_.ranks_simulated = static_cast<int>(ranks_.size());
  for (const RankGraph& g : graph_.ranks) {
    const int rep = folded_ ? graph_.layout.Rank(RankCoords{0, g.coords.mp, g.coords.pp}) : g.rank;
    RankMetrics m = ranks_[index_of_.at(rep)].metrics;
    m.rank = g.rank;
    result_.ranks.push_back(std::move(m));
  }
  return std::move(result_);
}

// ---- Deadlock report --------------------------------------------------------

std::string Simulation::DescribeWait(int r, int s, int* next_r, int* next_s) const {
  const RankState& st = ranks_[r];
  const RankGraph& g = *st.graph;
  const StreamState& ss = st.streams[s];
  const Instruction& ins = g.instructions()[g.streams()[s].queue[ss.pos]];
  std::string msg = StrCat(InstructionLocation(g, ins), " on stream ", g.StreamName(ins));
  *next_r = -1;
  auto stream_of = [&](int other, auto match) {
    const RankGraph& og = *ranks_[other].graph;
    for (const Instruction& i : og.instructions()) {
      if (match(og, i)) return i.stream;
    }
    return -1;
  };
  if (ss.waiting_on >= 0) {
    const Instruction& d = g.instructions()[ss.waiting_on];
    *next_r = r;
    *next_s = d.stream;
    return StrCat(msg, " waits for job ", d.job_index, " (",
                  JobToString(d.job, g.body->num_chunks > 1), "), op ", d.op_index, " (",
                  d.op_type, ") on stream ", g.StreamName(d));
  }
  auto it = ss.in_rendezvous ? rendezvous_.find(ss.rendezvous) : rendezvous_.end();
  if (it == rendezvous_.end()) return msg + " cannot start";
  if (ins.kind == InstructionKind::kCollective) {
    const std::vector<int>& group = g.Group(ins);
    std::vector<char> here(group.size(), 0);
    for (const auto& [pr, pid] : it->second.arrived) {
      const int global = ranks_[pr].graph->rank;
      for (size_t i = 0; i < group.size(); ++i) here[i] |= group[i] == global;
    }
    for (size_t i = 0; i < group.size(); ++i) {
      if (here[i]) continue;
      *next_r = IndexOfRank(group[i]);
      *next_s = stream_of(*next_r, [&](const RankGraph&, const Instruction& o) {
        return o.kind == InstructionKind::kCollective && o.ring == ins.ring &&
               o.comm_seq == ins.comm_seq;
      });
      return StrCat(msg, " waits in call ", ins.comm_seq, " on ring ", RingName(ins.ring),
                    " for rank ", group[i], " (", it->second.arrived.size(), " of ",
                    group.size(), " ranks arrived)");
    }
    return msg + " waits in a collective";
  }
  const bool send = ins.kind == InstructionKind::kSend;
  const int peer = g.Peer(ins);
  *next_r = IndexOfRank(peer);
  *next_s = stream_of(*next_r, [&](const RankGraph& og, const Instruction& o) {
    return o.kind == (send ? InstructionKind::kRecv : InstructionKind::kSend) &&
           o.peer_stage == g.coords.pp && o.comm_seq == ins.comm_seq;
  });
  return StrCat(msg, send ? " waits for rank " : " waits for its send from rank ", peer,
                send ? " to receive it" : "");
}

Status Simulation::Deadlock() const {
  std::vector<std::pair<int, int>> blocked;  // (rank index, stream)
  for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
    const RankState& st = ranks_[r];
    for (int s = 0; s < static_cast<int>(st.streams.size()); ++s) {
      if (st.streams[s].pos < st.graph->streams()[s].queue.size()) blocked.emplace_back(r, s);
    }
  }
  if (blocked.empty()) return Status::OK();
  // Lowest rank first; within it, a stream waiting on another rank first.
  std::sort(blocked.begin(), blocked.end(), [&](const auto& a, const auto& b) {
    const int ra = ranks_[a.first].graph->rank, rb = ranks_[b.first].graph->rank;
    if (ra != rb) return ra < rb;
    const bool wa = ranks_[a.first].streams[a.second].in_rendezvous;
    const bool wb = ranks_[b.first].streams[b.second].in_rendezvous;
    return wa != wb ? wa : a.second < b.second;
  });
  std::string msg = "deadlock: ";
  std::vector<std::pair<int, int>> seen;
  int r = blocked[0].first, s = blocked[0].second;
  for (int n = 0; n < kMaxReportedWaits && r >= 0 && s >= 0; ++n) {
    if (std::find(seen.begin(), seen.end(), std::make_pair(r, s)) != seen.end()) break;
    seen.emplace_back(r, s);
    const StreamState& ss = ranks_[r].streams[s];
    if (ss.pos >= ranks_[r].graph->streams()[s].queue.size()) break;
    int nr = -1, ns = -1;
    msg += StrCat(n ? "; " : "", DescribeWait(r, s, &nr, &ns));
    r = nr;
    s = ns;
  }
  std::vector<int> ranks;
  for (const auto& [br, bs] : blocked) ranks.push_back(br);
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  msg += StrCat("; ", ranks.size(), " of ", ranks_.size(), " ranks blocked in all");
  return FailedPrecondition(msg);
}

}  // namespace

StatusOr<SimulationResult> Simulate(const ExecutionGraph& graph,
                                    const SimulationOptions& options) {
  return Simulation(graph, options).Run();
}

}  // namespace loom
