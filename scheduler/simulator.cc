#include "scheduler/simulator.h"

#include <algorithm>
#include <limits>

#include "scheduler/simulation_state.h"

namespace loom {
namespace simulator_internal {

int Simulation::Representative(const RankGraph& g) const {
  if (!fold_dp_ && !fold_mp_) return g.rank;
  return graph_.layout.Rank(
      RankCoords{fold_dp_ ? 0 : g.coords.dp, fold_mp_ ? 0 : g.coords.mp, g.coords.pp});
}

bool Simulation::CanFold(bool dp, bool mp) const {
  std::unordered_map<int, const RankGraph*> by_rank;
  for (const RankGraph& g : graph_.ranks) by_rank[g.rank] = &g;
  for (const RankGraph& g : graph_.ranks) {
    auto it = by_rank.find(graph_.layout.Rank(
        RankCoords{dp ? 0 : g.coords.dp, mp ? 0 : g.coords.mp, g.coords.pp}));
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
  std::unordered_map<int, int> pool_index;  // the model's pool id -> pools_
  bool pooled = false;
  for (const RankGraph& g : graph_.ranks) pooled |= cores_ != nullptr && cores_->CorePool(g) >= 0;
  // Ranks that share cores slow each other down: replicas no longer time
  // alike.
  const bool dp = options_.fold_data_parallel && !pooled && graph_.layout.dp > 1;
  const bool mp = options_.fold_tensor_parallel && !pooled && graph_.layout.mp > 1;
  if ((dp || mp) && CanFold(dp, mp)) {
    fold_dp_ = dp;
    fold_mp_ = mp;
  } else if (dp && mp && CanFold(true, false)) {
    fold_dp_ = true;  // the mp peers have bodies of their own
  }
  for (size_t i = 0; i < graph_.ranks.size(); ++i) {
    const RankGraph& g = graph_.ranks[i];
    if (Representative(g) != g.rank) continue;
    index_of_[g.rank] = static_cast<int>(ranks_.size());
    ranks_.emplace_back();
    RankState& st = ranks_.back();
    st.graph = &g;
    const int pool = cores_ != nullptr ? cores_->CorePool(g) : -1;
    if (pool >= 0) {
      auto [it, fresh] = pool_index.emplace(pool, static_cast<int>(pools_.size()));
      if (fresh) {
        Pool p;
        p.cores = cores_->PoolCores(pool);
        p.slowdown = cores_->CommSlowdown(pool);
        p.comm_slowdown = cores_->ComputeCommSlowdown(pool);
        p.shared_slowdown = cores_->SharedCoreSlowdown(pool);
        if (!(p.cores > 0) || !(p.slowdown >= 1) || !(p.comm_slowdown >= 1)) {
          return InvalidArgument("simulator: core pool ", pool, " of rank ", g.rank, " has ",
                                 p.cores, " cores and slowdowns of ", p.slowdown, " and ",
                                 p.comm_slowdown, "; need cores > 0 and slowdowns >= 1");
        }
        pools_.push_back(p);
      }
      st.pool = it->second;
      ++pools_[st.pool].ranks;
    }
    for (const Instruction& ins : g.instructions()) {
      if (queues_) break;
      queues_ = ins.kind == InstructionKind::kSend && timer_->LinkQueuesHandedOverBytes(g, ins);
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
        if (temp.fed) Allocate(st, temp);
      }
      st.metrics.peak_temporary_bytes = st.live_bytes;
      st.metrics.peak_temporaries_by_kind = st.live_by_kind;
      st.metrics.layers = g.body->layers;
      st.metrics.recomputed_layers = g.body->recomputed_layers;
    }
    for (const StreamQueue& s : g.streams()) {
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
    const bool dp_ring =
        ins.ring == kDpRing || ins.ring == kShardingRing || ins.ring == kDpReplicaRing;
    if ((fold_dp_ && dp_ring) || (fold_mp_ && ins.ring == kMpRing)) {
      // The replicas or peers not simulated arrive when this one does.
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
  const CommCategory comm = CommCategoryOf(*st.graph, ins);
  if (delta > 0) {
    st.accounting.Start(t, ins.kind, calc, comm);
  } else {
    st.accounting.End(t, ins.kind, calc, comm);
  }
}

void Simulation::Start(int r, int id, double now, const CallStart& call, double priced) {
  RankState& st = ranks_[r];
  const Instruction& ins = st.graph->instructions()[id];
  double seconds = 0;
  if (ins.communicates()) {
    seconds = priced >= 0 ? priced : timer_->CommSeconds(*st.graph, ins, call);
    st.streams[ins.stream].end = now + seconds;
    st.streams[ins.stream].link_credit_after = timer_->LinkCreditAfter(*st.graph, ins, call);
    st.streams[ins.stream].beside_slowdown =
        pools_.empty() ? 1 : cores_->BesideCallsSlowdown(*st.graph, ins, call);
    ++st.link_calls;
  } else if (ins.kind != InstructionKind::kNoOp) {
    seconds = timer_->Seconds(*st.graph, ins);
  }
  Count(st, ins, now, +1);
  st.streams[ins.stream].start = now;
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
    ss.cpu_share = std::clamp(cores_->CommCpuShare(*st.graph, ins, call), 0.0, 1.0);
    // Ranks that outnumber their cores take turns on them with a call's own
    // CPU: priced as that much of a core, where the timer charges it.
    const double cpu = pool.ranks > pool.cores ? cores_->CommCpuSeconds(*st.graph, ins) : 0.0;
    ss.core_taken = cpu > 0 && seconds > 0 ? std::min(1.0, cpu / seconds) : 0.0;
    if (ss.core_taken > 0) {
      pool.calls_cpu += ss.core_taken;
    } else {
      pool.copying += ss.cpu_share;
    }
    pool.calls.emplace_back(r, ins.stream);
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
  const double slow = 1 + (pool.slowdown - 1) * std::min(1.0, pool.copying);
  // Ranks time-sliced on the cores: more tasks than cores, of two ranks.
  const bool ranks_share =
      static_cast<double>(pool.tasks.size()) > pool.cores &&
      std::any_of(pool.tasks.begin(), pool.tasks.end(),
                  [&](const auto& t) { return t.first != pool.tasks.front().first; });
  const double shared = ranks_share ? pool.shared_slowdown : 1.0;
  double left = pool.cores - pool.calls_cpu;
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
      ss.rate = share / (slow * shared);
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
  const bool full = static_cast<double>(pool.tasks.size()) >= pool.cores;
  for (const auto& [r, s] : pool.comms) {
    StreamState& ss = ranks_[r].streams[s];
    ss.remaining = std::max(0.0, ss.remaining - (now - ss.since) * ss.rate);
    ss.since = now;
    ss.rate = full ? 1.0 / (1 + (pool.comm_slowdown - 1) * ss.cpu_share) : 1.0;
    ss.end = now + ss.remaining / ss.rate;
    const int id = ranks_[r].graph->streams()[s].queue[ss.pos];
    events_.push(Event{ss.end, seq_++, r, id, ++ss.version});
  }
}

double Simulation::ComputeRunAfter(int r, int s, double horizon) const {
  const RankState& st = ranks_[r];
  const std::vector<int>& queue = st.graph->streams()[s].queue;
  double run = 0;
  for (size_t k = st.streams[s].pos + 1; k < queue.size() && run < horizon; ++k) {
    const Instruction& ins = st.graph->instructions()[queue[k]];
    // (A no-op, such as a view, ends the run too, though it does not block:
    // the accuracy table of docs/simulator_accuracy.md was measured so.)
    if (ins.kind != InstructionKind::kCompute) break;
    // An unfinished dependency on this stream is earlier in the run; one
    // elsewhere (a call's result) blocks the thread here.
    for (int d : ins.deps) {
      if (!st.done[d] && st.graph->instructions()[d].stream != s) return run;
    }
    run += timer_->Seconds(*st.graph, ins);
  }
  return run;
}

double Simulation::CoresBusyFor(const Rendezvous& rv, double now) const {
  const double horizon = cores_ != nullptr ? cores_->CoreRunHorizon() : 0;
  double longest = -1;
  for (const auto& [pr, pid] : rv.arrived) {
    const int pool = ranks_[pr].pool;
    if (pool < 0) return -1;
    double left = -1;
    for (const auto& [tr, ts] : pools_[pool].tasks) {
      const StreamState& t = ranks_[tr].streams[ts];
      if (t.rate <= 0) continue;  // waiting for a core itself
      left = std::max(left, std::max(0.0, t.remaining - (now - t.since) * t.rate) / t.rate +
                                ComputeRunAfter(tr, ts, horizon) / t.rate);
    }
    if (left < 0) return -1;
    longest = std::max(longest, left);
  }
  return longest;
}

CallStart Simulation::CallStartOf(
    const Rendezvous& rv, double now,
    std::vector<const std::vector<std::pair<int, int>>*>* beside) const {
  CallStart call;
  call.waited = now - rv.first;
  call.link_idle = std::numeric_limits<double>::infinity();
  call.link_credit = std::numeric_limits<double>::infinity();
  for (const auto& [pr, pid] : rv.arrived) {
    const RankState& p = ranks_[pr];
    call.link_idle =
        std::min(call.link_idle, p.link_calls > 0 ? 0.0 : std::max(0.0, now - p.link_idle_since));
    call.link_credit = std::min(call.link_credit, p.link_calls > 0 ? 0.0 : p.link_credit);
  }
  if (pools_.empty()) return call;
  call.cores_busy_for = CoresBusyFor(rv, now);
  // (No party has started yet: a pool's calls other than the party's own
  // are other ranks'.)
  call.other_calls_for = 0;
  for (const auto& [pr, pid] : rv.arrived) {
    const RankState& p = ranks_[pr];
    if (p.pool < 0) continue;
    for (const auto& [other, os] : pools_[p.pool].calls) {
      if (other == pr) continue;
      call.beside_other_calls = true;
      call.other_calls_for = std::max(call.other_calls_for, ranks_[other].streams[os].end - now);
      const std::vector<std::pair<int, int>>* joined = ranks_[other].streams[os].parties.get();
      if (joined != nullptr && std::find(beside->begin(), beside->end(), joined) == beside->end()) {
        beside->push_back(joined);
      }
    }
  }
  return call;
}

Status Simulation::Arrive(int r, int s, const Instruction& ins, double now) {
  RankState& st = ranks_[r];
  StreamState& ss = st.streams[s];
  ss.busy = true;
  ss.arrived = now;
  // Outputs are allocated on arrival: a call's (a recv's buffer, a
  // gather's) is held while it waits for its other parties.
  if (options_.metrics) {
    const RankGraphBody& body = *st.graph->body;
    for (int i = ins.uses_end(); i < ins.touches_begin + ins.touches_count; ++i) {
      Untouch(st, body, body.touches[i]);
    }
    for (int i = 0; i < ins.allocs; ++i) {
      Allocate(st, body.temporaries[body.touches[ins.touches_begin + i]]);
    }
    if (st.live_bytes > st.metrics.peak_temporary_bytes) {
      st.metrics.peak_temporary_bytes = st.live_bytes;
      st.metrics.peak_temporaries_by_kind = st.live_by_kind;
    }
  }
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
  std::vector<const std::vector<std::pair<int, int>>*> beside;
  const CallStart call = CallStartOf(rv, now, &beside);
  // (Kept for SlowBeside, which only cores ranks share call for, and for
  // bytes queued on a link.)
  const auto parties = pools_.empty() && !queues_
                           ? nullptr
                           : std::make_shared<const std::vector<std::pair<int, int>>>(rv.arrived);
  // Bytes sends handed over still queue on a party's link: the call's
  // come after them (for a transfer, the sender's link).
  double queued = now;
  for (const auto& [pr, pid] : rv.arrived) {
    if (ranks_[pr].graph->instructions()[pid].kind != InstructionKind::kRecv) {
      queued = std::max(queued, ranks_[pr].queued_until);
    }
  }
  double ends = now;
  for (const auto& [pr, pid] : rv.arrived) {
    const RankState& p = ranks_[pr];
    const Instruction& party = p.graph->instructions()[pid];
    StreamState& ps = ranks_[pr].streams[party.stream];
    ps.in_rendezvous = false;
    ps.parties = parties;
    // A send that returns once its bytes are handed over takes that long.
    const double hand_over = party.kind == InstructionKind::kSend
                                 ? timer_->SendHandOverSeconds(*p.graph, party)
                                 : -1;
    Start(pr, pid, now, call, hand_over);
    if (queued > now && hand_over < 0) ExtendCall(pr, party.stream, now, queued - now);
    ends = std::max(ends, ps.end);
  }
  QueueHandedOverBytes(rv, now);
  // The calls this one joined are slowed while it overlaps them, as it is
  // by them (priced in CommSeconds).
  for (const auto* joined : beside) SlowBeside(*joined, now, ends);
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
    for (auto* list : {&pools_[st.pool].comms, &pools_[st.pool].calls}) {
      auto it = std::find(list->begin(), list->end(), std::make_pair(e.rank, ins.stream));
      if (it != list->end()) list->erase(it);
    }
  }
  if (ins.communicates() && --st.link_calls == 0) {
    st.link_idle_since = std::max(e.time, st.queued_until);
    st.link_credit = ss.link_credit_after;
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
    for (int i = ins.touches_begin; i < ins.uses_end(); ++i) Untouch(st, body, body.touches[i]);
  }
  if (options_.trace) {
    TraceEvent traced = TraceEventOf(*st.graph, ins, static_cast<int64_t>(ss.start * kNsPerSecond),
                                     static_cast<int64_t>(e.time * kNsPerSecond));
    traced.arrived_ns = static_cast<int64_t>(ss.arrived * kNsPerSecond);
    result_.trace.push_back(std::move(traced));
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
      if (ins.communicates()) {
        // With nothing in flight, exactly 0 (not a rounding residue).
        Pool& pool = pools_[st.pool];
        const StreamState& ended = st.streams[s];
        if (pool.calls.empty()) {
          pool.copying = pool.calls_cpu = 0;
        } else if (ended.core_taken > 0) {
          pool.calls_cpu -= ended.core_taken;
        } else {
          pool.copying -= ended.cpu_share;
        }
      }
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
  // Every rank of the graph, in its order; a folded replica or peer
  // reports the metrics of the one simulated.
  result_.ranks_simulated = static_cast<int>(ranks_.size());
  for (const RankGraph& g : graph_.ranks) {
    RankMetrics m = ranks_[index_of_.at(Representative(g))].metrics;
    m.rank = g.rank;
    result_.ranks.push_back(std::move(m));
  }
  return std::move(result_);
}

}  // namespace simulator_internal

const RankMetrics& SimulationResult::PeakRank() const {
  const RankMetrics* peak = &ranks.front();
  for (const RankMetrics& m : ranks) {
    if (m.peak_bytes() > peak->peak_bytes()) peak = &m;
  }
  return *peak;
}

StatusOr<SimulationResult> Simulate(const ExecutionGraph& graph,
                                    const SimulationOptions& options) {
  return simulator_internal::Simulation(graph, options).Run();
}

}  // namespace loom
