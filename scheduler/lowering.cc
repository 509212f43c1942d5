#include <algorithm>
#include <unordered_map>

#include "scheduler/comm_ops.h"
#include "scheduler/execution_graph.h"

namespace loom {
namespace {

// Tracks, per var of a scope, its last writer and the readers since.
struct VarState {
  int writer = -1;
  std::vector<int> readers;
};

}  // namespace

StatusOr<RankGraph> LowerRank(const RankPlan& plan) {
  RankGraph g;
  g.rank = plan.rank;
  g.coords = plan.coords;
  for (const Job& j : plan.jobs) g.micro_batches = std::max(g.micro_batches, j.micro_batch + 1);
  // (scope, var) -> state; scope -1 is the step scope of persistables.
  std::map<std::pair<int, std::string>, VarState> vars;
  std::unordered_map<std::string, int> recorded;          // "mb/event" -> instruction
  std::map<int, int> last_on_ring;                        // ring -> instruction
  std::map<int, int64_t> ring_calls;                      // ring -> calls so far
  std::map<std::pair<int, int>, int64_t> p2p_calls;       // (peer, send?) -> calls

  for (int ji = 0; ji < static_cast<int>(plan.jobs.size()); ++ji) {
    const Job& job = plan.jobs[ji];
    const Program* program = plan.ProgramFor(job);
    if (program == nullptr) {
      return NotFound("rank ", plan.rank, ", job ", ji, " (",
                      JobToString(job, plan.num_chunks > 1), "): no program");
    }
    const Block& block = program->global_block();
    const bool last_mb = job.micro_batch == g.micro_batches - 1 ||
                         job.type == JobType::kOptimizer;
    for (Op* op : block.ops()) {
      Instruction ins;
      ins.id = static_cast<int>(g.instructions.size());
      ins.job_index = ji;
      ins.job = job;
      ins.op = op;
      ins.micro_batch = job.micro_batch;
      ins.stream = op->desc().stream().empty() ? stream::kCalc : op->desc().stream();
      ins.skip = op->desc().last_micro_batch_only() && !last_mb;
      std::vector<int> deps;
      auto scope_of = [&](const std::string& var) {
        const proto::VarDesc* v = block.FindVar(var);
        return v != nullptr && v->persistable() ? -1 : job.micro_batch;
      };
      for (const std::string& in : op->InputVars()) {
        VarState& s = vars[{scope_of(in), in}];
        if (s.writer >= 0) deps.push_back(s.writer);
      }
      for (const std::string& out : op->OutputVars()) {
        VarState& s = vars[{scope_of(out), out}];
        if (s.writer >= 0) deps.push_back(s.writer);
        for (int r : s.readers) deps.push_back(r);
      }
      for (const std::string& e : op->desc().wait_events()) {
        auto it = recorded.find(StrCat(job.micro_batch, "/", e));
        if (it == recorded.end()) {
          return FailedPrecondition("rank ", plan.rank, ", job ", ji, " (",
                                    JobToString(job, plan.num_chunks > 1), "): ",
                                    op->Location(), " waits on event '", e,
                                    "', which no earlier op records");
        }
        deps.push_back(it->second);
      }
      const std::string& type = op->type();
      if (IsRuntimeCollective(type) || type == "send" || type == "recv") {
        ins.ring = op->GetAttr<int32_t>("ring_id");
        if (type == "send" || type == "recv") {
          const int peer = op->GetAttr<int32_t>("peer");
          ins.comm_seq = p2p_calls[{peer, type == "send"}]++;
        } else {
          ins.comm_seq = ring_calls[ins.ring]++;
          // Every member issues the ring's calls in plan order, whatever
          // stream each call sits on.
          auto prev = last_on_ring.find(ins.ring);
          if (prev != last_on_ring.end()) deps.push_back(prev->second);
          last_on_ring[ins.ring] = ins.id;
        }
      }
      // Keep only cross-stream dependencies, once each.
      std::sort(deps.begin(), deps.end());
      deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
      for (int d : deps) {
        if (g.instructions[d].stream != ins.stream) ins.deps.push_back(d);
      }
      for (const std::string& in : op->InputVars()) {
        vars[{scope_of(in), in}].readers.push_back(ins.id);
      }
      for (const std::string& out : op->OutputVars()) {
        VarState& s = vars[{scope_of(out), out}];
        s.writer = ins.id;
        s.readers.clear();
      }
      for (const std::string& e : op->desc().record_events()) {
        recorded[StrCat(job.micro_batch, "/", e)] = ins.id;
      }
      g.streams[ins.stream].push_back(ins.id);
      g.instructions.push_back(std::move(ins));
    }
  }
  return g;
}

StatusOr<ExecutionGraph> LowerPlan(const Plan& plan) {
  ExecutionGraph graph;
  graph.layout = plan.layout;
  graph.ranks.reserve(plan.ranks.size());
  for (const RankPlan& rp : plan.ranks) {
    LOOM_ASSIGN_OR_RETURN(RankGraph g, LowerRank(rp));
    graph.ranks.push_back(std::move(g));
  }
  return graph;
}

std::string RankGraphToString(const RankGraph& g) {
  std::string out;
  for (const auto& [stream, ids] : g.streams) {
    out += stream + ":";
    for (int id : ids) {
      const Instruction& ins = g.instructions[id];
      out += StrCat(" ", JobToString(ins.job, false), ":", ins.op->type());
      if (ins.skip) out += "(skip)";
    }
    out += "\n";
  }
  return out;
}

}  // namespace loom
