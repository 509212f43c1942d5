// How a call in flight is stretched: beside another rank's call on shared
// cores (SlowBeside), and behind or beside the bytes a send handed over to
// a link that queues them (QueueHandedOverBytes); both move its end with
// ExtendCall.
#include <algorithm>
#include <utility>
#include <vector>

#include <glog/logging.h>

#include "scheduler/simulation_state.h"

namespace loom {
namespace simulator_internal {

void Simulation::SlowBeside(const std::vector<std::pair<int, int>>& parties, double now,
                            double until) {
  // The parties still in the call: a send that handed its bytes over may
  // have gone on to its stream's next instruction.
  std::vector<std::pair<int, int>> running;  // (rank index, stream)
  for (const auto& [r, id] : parties) {
    const RankState& st = ranks_[r];
    const int s = st.graph->instructions()[id].stream;
    const StreamState& ss = st.streams[s];
    if (ss.busy && !ss.in_rendezvous && st.graph->streams()[s].queue[ss.pos] == id) {
      running.emplace_back(r, s);
    }
  }
  // One call: its parties end together, at the pace of the slowest.
  double end = now, slowdown = 1;
  for (const auto& [r, s] : running) {
    end = std::max(end, ranks_[r].streams[s].end);
    slowdown = std::max(slowdown, ranks_[r].streams[s].beside_slowdown);
  }
  if (slowdown <= 1 || end <= now) return;
  // At 1/slowdown of its pace while overlapped: its end moves out by the
  // overlap's (slowdown - 1)/slowdown.
  const double extra = (std::min(end, until) - now) * (1 - 1 / slowdown);
  for (const auto& [r, s] : running) ExtendCall(r, s, now, extra);
}

void Simulation::ExtendCall(int r, int s, double now, double extra) {
  const RankState& st = ranks_[r];
  StreamState& ss = ranks_[r].streams[s];
  if (st.pool >= 0 && std::find(pools_[st.pool].comms.begin(), pools_[st.pool].comms.end(),
                                std::make_pair(r, s)) != pools_[st.pool].comms.end()) {
    // Its end follows the work left (Reprice): that grows by the extra time.
    ss.remaining = std::max(0.0, ss.remaining - (now - ss.since) * ss.rate) + extra * ss.rate;
    ss.since = now;
  }
  ss.end += extra;
  events_.push(Event{ss.end, seq_++, r, st.graph->streams()[s].queue[ss.pos], ++ss.version});
}

void Simulation::QueueHandedOverBytes(const Rendezvous& rv, double now) {
  // (rank index, instruction) of the send and of the recv.
  std::pair<int, int> send{-1, -1}, recv{-1, -1};
  for (const auto& party : rv.arrived) {
    const InstructionKind kind = ranks_[party.first].graph->instructions()[party.second].kind;
    if (kind == InstructionKind::kSend) send = party;
    if (kind == InstructionKind::kRecv) recv = party;
  }
  if (send.first < 0 || recv.first < 0) return;
  RankState& st = ranks_[send.first];
  const Instruction& ins = st.graph->instructions()[send.second];
  if (timer_->SendHandOverSeconds(*st.graph, ins) < 0 ||
      !timer_->LinkQueuesHandedOverBytes(*st.graph, ins)) {
    return;
  }
  const RankState& to = ranks_[recv.first];
  const double arrives = to.streams[to.graph->instructions()[recv.second].stream].end;
  // The sender's calls in flight that send share the link with these
  // bytes (a recv's come over its peer's).
  for (size_t s = 0; s < st.streams.size(); ++s) {
    const StreamState& ss = st.streams[s];
    if (static_cast<int>(s) == ins.stream || !ss.busy || ss.in_rendezvous || ss.end <= now) {
      continue;
    }
    const Instruction& running = st.graph->instructions()[st.graph->streams()[s].queue[ss.pos]];
    if (!running.communicates() || running.kind == InstructionKind::kRecv) continue;
    // Its parties end together (every call keeps them while links queue).
    DCHECK(ss.parties != nullptr);
    for (const auto& [pr, pid] : *ss.parties) {
      const RankState& p = ranks_[pr];
      const int ps = p.graph->instructions()[pid].stream;
      const StreamState& party = p.streams[ps];
      if (party.busy && !party.in_rendezvous && p.graph->streams()[ps].queue[party.pos] == pid) {
        ExtendCall(pr, ps, now, arrives - now);
      }
    }
  }
  st.queued_until = std::max(st.queued_until, arrives);
}

}  // namespace simulator_internal
}  // namespace loom
