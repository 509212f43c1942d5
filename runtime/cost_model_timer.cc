#include "runtime/cost_model_timer.h"

#include <algorithm>

#include "cost_model/cluster.h"

namespace loom {

StatusOr<std::unique_ptr<CostModelTimer>> CostModelTimer::Create(
    const ExecutionGraph& graph, const OpCostEstimator& ops, const proto::Cluster& cluster,
    CommAlgorithm algorithm) {
  std::unique_ptr<CostModelTimer> t(new CostModelTimer(cluster, algorithm));
  std::unordered_map<std::string, int> priced;  // signature -> rule, once each
  for (const RankGraph& g : graph.ranks) {
    auto [it, fresh] = t->compute_.emplace(g.body.get(), std::vector<double>());
    if (!fresh) continue;
    std::vector<double>& seconds = it->second;
    seconds.assign(g.body->signatures.size(), -1);
    for (const Instruction& ins : g.instructions()) {
      if (ins.communicates() && !t->kinds_.count(ins.op_type)) {
        auto kind = CollectiveKindOf(ins.op_type);
        if (!kind.ok()) return kind.status().WithContext(InstructionLocation(g, ins));
        t->kinds_[ins.op_type] = *kind;
      }
      // Pure communication computes nothing; an op that does both (the
      // vocabulary-parallel cross entropy) is priced for both.
      const bool computes = ins.kind == InstructionKind::kCompute ||
                            (ins.kind == InstructionKind::kCollective && ins.flops > 0);
      if (!computes || seconds[ins.signature] >= 0) continue;
      const std::string& signature = g.body->signatures[ins.signature];
      OpWork work;
      work.flops = ins.flops;
      work.bytes = ins.bytes;
      auto cost = ops.Estimate(ins.op_type, signature, work);
      if (!cost.ok()) return cost.status().WithContext(InstructionLocation(g, ins));
      seconds[ins.signature] = cost->seconds;
      // (A view has no work to price by any rule.)
      const bool works = work.flops > 0 || work.bytes > 0;
      if (works && priced.emplace(signature, static_cast<int>(cost->rule)).second) {
        ++t->rule_counts_[static_cast<int>(cost->rule)];
      }
    }
  }
  return t;
}

StatusOr<std::unique_ptr<CostModelTimer>> CostModelTimer::ForCluster(
    const ExecutionGraph& graph, const proto::Cluster& cluster,
    const std::string& cost_table_path) {
  LOOM_ASSIGN_OR_RETURN(CostTable table, CostTable::LoadOrEmpty(cost_table_path));
  const OpCostModel ops(cluster, std::move(table));
  return Create(graph, ops, cluster);
}

double CostModelTimer::Seconds(const RankGraph& g, const Instruction& ins) const {
  return Price(g, ins, false, 0);
}

double CostModelTimer::CommSeconds(const RankGraph& g, const Instruction& ins,
                                   const CallStart& call) const {
  const bool after_wait = call.waited > kSleptSeconds;
  const double seconds = Price(g, ins, after_wait, call.link_idle);
  if (!cluster_.has_core_wait() || call.cores_busy_for < 0 || ins.comm_calls <= 0) {
    return seconds;
  }
  const proto::CoreWait& w = cluster_.core_wait();
  const double latency = ins.comm_calls * CallSeconds(g, ins, 0, after_wait, 0);
  return seconds - (1 - w.latency_scale()) * latency +
         w.waits() * std::min(call.cores_busy_for, w.slice_seconds());
}

double CostModelTimer::Price(const RankGraph& g, const Instruction& ins, bool after_wait,
                             double link_idle) const {
  double s = 0;
  if (ins.kind == InstructionKind::kNoOp) return 0;
  if (ins.kind == InstructionKind::kCompute ||
      (ins.kind == InstructionKind::kCollective && ins.flops > 0)) {
    s += compute_.at(g.body.get())[ins.signature];
  }
  if (ins.communicates() && ins.comm_calls > 0) {
    s += CallSeconds(g, ins, ins.comm_bytes, after_wait, link_idle);
    if (ins.comm_calls > 1) {
      s += (ins.comm_calls - 1) * CallSeconds(g, ins, ins.comm_bytes, after_wait, 0);
    }
  }
  return s;
}

double CostModelTimer::CallSeconds(const RankGraph& g, const Instruction& ins, int64_t bytes,
                                   bool after_wait, double link_idle) const {
  const CollectiveKind kind = kinds_.at(ins.op_type);
  if (ins.kind == InstructionKind::kSend || ins.kind == InstructionKind::kRecv) {
    return comm_.CommSeconds(kind, algorithm_, bytes, {g.rank, g.Peer(ins)}, after_wait,
                             link_idle);
  }
  return comm_.CommSeconds(kind, algorithm_, bytes, g.Group(ins), after_wait, link_idle);
}

double CostModelTimer::CommCpuShare(const RankGraph& g, const Instruction& ins) const {
  if (ins.comm_calls <= 0) return 0;
  const double whole = CallSeconds(g, ins, ins.comm_bytes, false, 0);
  return whole > 0 ? 1 - CallSeconds(g, ins, 0, false, 0) / whole : 0;
}

int CostModelTimer::CorePool(const RankGraph& g) const {
  const proto::Device& d = cluster_.device();
  if (d.kind() != proto::Device::CPU || d.core_sharing() == proto::Device::EXCLUSIVE) return -1;
  const int per_device = cluster_.ranks_per_device();
  if (d.core_sharing() == proto::Device::PINNED) {
    // One pool per core, holding the ranks pinned to it.
    if (cluster_.host_cores() > 0) return g.rank % cluster_.host_cores();
    const int cores = std::max(1, d.cores());
    const int device = per_device == 0 ? 0 : g.rank / per_device;
    const int on_device = per_device == 0 ? g.rank : g.rank % per_device;
    return device * cores + on_device % cores;
  }
  // Nodes emulated on one host share its cores; otherwise a device's.
  if (cluster_.host_cores() > 0) return 0;
  return per_device == 0 ? 0 : g.rank / per_device;
}

double CostModelTimer::PoolCores(int) const {
  if (cluster_.device().core_sharing() == proto::Device::PINNED) return 1;
  return cluster_.host_cores() > 0 ? cluster_.host_cores() : cluster_.device().cores();
}

double CostModelTimer::CommSlowdown(int) const { return cluster_.comm_compute_slowdown(); }

double CostModelTimer::ComputeCommSlowdown(int) const {
  return cluster_.compute_comm_slowdown();
}

}  // namespace loom
