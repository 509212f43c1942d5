// The graph's own accessors; lowering.cc builds the graph.
#include "scheduler/execution_graph.h"

namespace loom {

const char* InstructionKindName(InstructionKind kind) {
  switch (kind) {
    case InstructionKind::kCompute:
      return "compute";
    case InstructionKind::kCollective:
      return "collective";
    case InstructionKind::kSend:
      return "send";
    case InstructionKind::kRecv:
      return "recv";
    case InstructionKind::kNoOp:
      return "noop";
  }
  return "unknown";
}

int RankGraphBody::FindStream(const std::string& name) const {
  for (int i = 0; i < static_cast<int>(streams.size()); ++i) {
    if (streams[i].name == name) return i;
  }
  return -1;
}

RendezvousId RendezvousOf(const RankGraph& g, const Instruction& ins) {
  if (ins.kind == InstructionKind::kCollective) {
    return RendezvousId{static_cast<int>(ins.ring), g.Group(ins).front(), 0, ins.comm_seq};
  }
  const bool send = ins.kind == InstructionKind::kSend;
  return RendezvousId{-static_cast<int>(ins.ring), send ? g.rank : g.Peer(ins),
                      send ? g.Peer(ins) : g.rank, ins.comm_seq};
}

bool NamesTemporary(const RankGraphBody& body, const Temporary& temp,
                    const std::set<std::string>& names) {
  if (names.count(body.var_names[temp.var]) > 0) return true;
  for (int v : temp.views) {
    if (names.count(body.var_names[v]) > 0) return true;
  }
  return false;
}

std::string InstructionLocation(const RankGraph& g, const Instruction& ins) {
  return StrCat("rank ", g.rank, " (", CoordsToString(g.coords), "), job ",
                ins.job_index, " (", JobToString(ins.job, g.body->num_chunks > 1),
                "), op ", ins.op_index, " (", ins.op_type, ")");
}

}  // namespace loom
