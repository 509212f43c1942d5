// The deadlock report: which stream waits for what, followed across ranks.
#include "scheduler/simulation_state.h"

namespace loom {
namespace simulator_internal {

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

}  // namespace simulator_internal
}  // namespace loom
