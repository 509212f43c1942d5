#include "runtime/cost_model_timer.h"

#include <algorithm>
#include <unordered_set>

#include "cost_model/cluster.h"
#include "scheduler/cold_inputs.h"

namespace loom {

StatusOr<std::unique_ptr<CostModelTimer>> CostModelTimer::Create(const ExecutionGraph& graph,
                                                                 const CostContext& costs,
                                                                 CommAlgorithm algorithm) {
  std::unique_ptr<CostModelTimer> t(new CostModelTimer(costs, algorithm));
  std::unordered_map<int, int> pool_ranks;
  for (const RankGraph& g : graph.ranks) {
    const int pool = t->CorePool(g);
    if (pool >= 0 && ++pool_ranks[pool] == 2) t->shared_pools_.insert(pool);
  }
  // Ranks on two cores or more wait for the slower core where they meet.
  int cores_in_use = 0;
  for (const auto& [pool, ranks] : pool_ranks) {
    cores_in_use += std::min<int>(ranks, static_cast<int>(t->PoolCores(pool)));
  }
  const double compute_scale =
      cores_in_use >= 2 ? costs.cluster().shared_host().lockstep_slowdown() : 1.0;
  t->compute_scale_ = compute_scale;
  std::unordered_map<std::string, int> priced;  // signature -> rule, once each
  for (const RankGraph& g : graph.ranks) {
    auto [it, fresh] = t->compute_.emplace(g.body.get(), BodyPrices());
    if (!fresh) continue;
    std::vector<double>& seconds = it->second.by_signature;
    seconds.assign(g.body->signatures.size(), -1);
    // Bytes each signature read past the cache where it was profiled.
    std::vector<double> profiled_cold(g.body->signatures.size(), -1);
    for (const Instruction& ins : g.instructions()) {
      if (ins.communicates() && !t->kinds_.count(ins.op_type)) {
        auto kind = CollectiveCallOf(ins.op_type);
        if (!kind.ok()) return kind.status().WithContext(InstructionLocation(g, ins));
        t->kinds_[ins.op_type] = *kind;
      }
      // Pure communication computes nothing; an op that does both is priced for both.
      if (!g.body->Computes(ins) || seconds[ins.signature] >= 0) continue;
      const std::string& signature = g.body->signatures[ins.signature];
      const OpWork& work = g.body->Work(ins);
      auto cost = costs.ops().Estimate(ins.op_type, signature, work);
      if (!cost.ok()) return cost.status().WithContext(InstructionLocation(g, ins));
      seconds[ins.signature] = cost->seconds * compute_scale;
      profiled_cold[ins.signature] = cost->cold_input_bytes;
      // (A view has no work to price by any rule.)
      const bool works = work.flops > 0 || work.bytes > 0;
      if (works && priced.emplace(signature, static_cast<int>(cost->rule)).second) {
        ++t->rule_counts_[static_cast<int>(cost->rule)];
      }
    }
    t->AddColdReads(g, RankCacheShare(costs.cluster(), graph.layout.world_size()), profiled_cold,
                    &it->second);
  }
  return t;
}

void CostModelTimer::AddColdReads(const RankGraph& g, int64_t cache_share,
                                  const std::vector<double>& profiled_cold,
                                  BodyPrices* prices) const {
  const double per_byte = cluster_.device().uncached_read_seconds_per_byte();
  if (cache_share <= 0 || per_byte <= 0) return;
  const std::vector<int64_t> cold = ColdInputBytes(*g.body, cache_share);
  std::vector<double>& extra = prices->cold_extra;
  extra.assign(g.body->instructions.size(), 0);
  const std::vector<double>& seconds = prices->by_signature;
  for (const Instruction& ins : g.instructions()) {
    const double was = profiled_cold[ins.signature];
    if (ins.kind != InstructionKind::kCompute || was < 0) continue;
    // An op profiled where it read far more past the cache than here keeps
    // at least half its price: the rest of its work is not reading.
    const double more = (cold[ins.id] - was) * per_byte * compute_scale_;
    extra[ins.id] = std::max(more, -0.5 * seconds[ins.signature]);
  }
}

double CostModelTimer::Seconds(const RankGraph& g, const Instruction& ins) const {
  return Price(g, ins, CallRegime::kTogether, 0);
}

double CostModelTimer::CommSeconds(const RankGraph& g, const Instruction& ins,
                                   const CallStart& call) const {
  const CallRegime regime = RegimeOf(g, ins, call);
  if (regime == CallRegime::kSharedCores) {
    // The shared cores' costs were measured with both groups calling all
    // along; beside another rank's call that ends sooner, a call pays them
    // for that part of its time and its costs apart for the rest. Paid
    // whole, a call made calls beside it longer, and those made it longer
    // in turn, several times what was measured (docs/performance.md, "Measurements behind the code").
    CallStart apart = call;
    apart.beside_other_calls = false;
    const double alone = CommSeconds(g, ins, apart);
    const double beside = Price(g, ins, regime, call.link_idle, call.link_credit);
    const double part = beside > 0 ? std::min(1.0, call.other_calls_for / beside) : 1.0;
    return alone + (beside - alone) * part;
  }
  double seconds = Price(g, ins, regime, call.link_idle, call.link_credit);
  // The wait for busy cores (CoreWait), measured on all-reduces, holds for
  // transfers too: a send's bytes move only once the receiving rank's
  // thread gets its core. The shared cores' costs were measured beside
  // calls, not compute. A transfer between two ranks pinned to one core
  // waits for no other core: the sender holds it, and the receiver's
  // thread takes it as the sender's blocks. (Both measured on traced
  // transfers: docs/performance.md, "Measurements behind the code".)
  const proto::SharedHost& host = cluster_.shared_host();
  if (host.has_core_wait() && call.cores_busy_for >= 0 && regime != CallRegime::kSharedCores &&
      ins.comm_calls > 0 && !OnOneCore(g, ins)) {
    const proto::CoreWait& w = host.core_wait();
    seconds += w.waits() * std::min(call.cores_busy_for, w.slice_seconds());
  }
  return seconds;
}

CallRegime CostModelTimer::RegimeOf(const RankGraph& g, const Instruction& ins,
                                   const CallStart& call) const {
  // Beside another rank's call on a shared core, where measured so.
  if (call.beside_other_calls && CoresShared(g, ins) && HostCostsOf(g, ins).has_shared_cores()) {
    return CallRegime::kSharedCores;
  }
  // Cores that compute, or that other ranks' threads share, do not halt;
  // a link measured only in the other regimes prices them as before.
  const bool has_awake = HostCostsOf(g, ins).has_awake();
  if ((call.cores_busy_for >= 0 || CoresShared(g, ins)) && has_awake) return CallRegime::kAwake;
  if (call.waited > kSleptSeconds) return CallRegime::kAfterWait;
  // Parties that arrive together come from their compute, and while the
  // call runs each rank's executor waits for it by yielding on the rank's
  // core (HostFlag), so no party's core halts either. The link's own costs
  // were measured with nothing keeping the cores awake between messages.
  return has_awake ? CallRegime::kAwake : CallRegime::kTogether;
}

const proto::Link& CostModelTimer::LinkOf(const RankGraph& g, const Instruction& ins) const {
  if (ins.kind == InstructionKind::kSend || ins.kind == InstructionKind::kRecv) {
    return comm_.LinkAt(comm_.LevelOf({g.rank, g.Peer(ins)}));
  }
  return comm_.LinkAt(comm_.LevelOf(g.Group(ins)));
}

const proto::HostLinkCosts& CostModelTimer::HostCostsOf(const RankGraph& g,
                                                        const Instruction& ins) const {
  if (ins.kind == InstructionKind::kSend || ins.kind == InstructionKind::kRecv) {
    return comm_.HostCostsAt(comm_.LevelOf({g.rank, g.Peer(ins)}));
  }
  return comm_.HostCostsAt(comm_.LevelOf(g.Group(ins)));
}

bool CostModelTimer::CoresShared(const RankGraph& g, const Instruction& ins) const {
  if (shared_pools_.empty() || ins.comm_calls <= 0) return false;
  auto shared = [&](int rank) {
    const int pool = CorePoolOf(rank);
    return pool >= 0 && shared_pools_.count(pool) > 0;
  };
  if (ins.kind == InstructionKind::kSend || ins.kind == InstructionKind::kRecv) {
    return shared(g.rank) && shared(g.Peer(ins));
  }
  for (int r : g.Group(ins)) {
    if (!shared(r)) return false;
  }
  return true;
}

double CostModelTimer::Price(const RankGraph& g, const Instruction& ins, CallRegime regime,
                             double link_idle, double link_credit) const {
  double s = 0;
  if (ins.kind == InstructionKind::kNoOp) return 0;
  if (g.body->Computes(ins)) {
    const BodyPrices& prices = compute_.at(g.body.get());
    s += prices.by_signature[ins.signature];
    if (!prices.cold_extra.empty()) s += prices.cold_extra[ins.id];
  }
  if (ins.communicates() && ins.comm_calls > 0) {
    s += CallSeconds(g, ins, ins.comm_bytes, regime, link_idle, link_credit);
    if (ins.comm_calls > 1) {
      // The calls after the first follow it back to back, each taken to
      // start with what the first left.
      const double left = CreditAfterCall(g, ins, regime, link_idle, link_credit);
      s += (ins.comm_calls - 1) * CallSeconds(g, ins, ins.comm_bytes, regime, 0, left);
    }
  }
  return s;
}

double CostModelTimer::LinkCreditAfter(const RankGraph& g, const Instruction& ins,
                                       const CallStart& call) const {
  if (!ins.communicates() || ins.comm_calls <= 0 || !LinkOf(g, ins).has_burst_bytes()) return 0;
  const CallRegime regime = RegimeOf(g, ins, call);
  const double left = CreditAfterCall(g, ins, regime, call.link_idle, call.link_credit);
  return ins.comm_calls > 1 ? CreditAfterCall(g, ins, regime, 0, left) : left;
}

double CostModelTimer::CreditAfterCall(const RankGraph& g, const Instruction& ins,
                                       CallRegime regime, double link_idle,
                                       double link_credit) const {
  const CommCall kind = kinds_.at(ins.op_type);
  const std::vector<int> group =
      ins.kind == InstructionKind::kSend || ins.kind == InstructionKind::kRecv
          ? std::vector<int>{g.rank, g.Peer(ins)}
          : g.Group(ins);
  return comm_.ShaperCreditAfter(kind, algorithm_, ins.comm_bytes, group, regime, link_idle,
                                 link_credit);
}

double CostModelTimer::CallSeconds(const RankGraph& g, const Instruction& ins, int64_t bytes,
                                   CallRegime regime, double link_idle, double link_credit) const {
  const CommCall kind = kinds_.at(ins.op_type);
  // Link.after_idle was measured with the parties arriving together, each
  // on a core of its own. Where a party waited, after_wait's costs, timed
  // with arrivals apart, hold instead: the extra priced traced calls that
  // waited at several times their time (docs/performance.md, "Measurements behind the code").
  // Where each party's core is shared with another rank, that
  // rank keeps the core and link from going quiet so: under a launch of 4
  // ranks on 2 cores, traced gpt-tiny and gpt-small mp=2 pp=2 all-reduces
  // were faster after longer quiet, not slower (docs/simulator_accuracy.md).
  const bool charge_after_idle = regime != CallRegime::kAfterWait && !CoresShared(g, ins);
  if (ins.kind == InstructionKind::kSend || ins.kind == InstructionKind::kRecv) {
    return comm_.CommSeconds(kind, algorithm_, bytes, {g.rank, g.Peer(ins)}, regime, link_idle,
                             charge_after_idle, link_credit);
  }
  return comm_.CommSeconds(kind, algorithm_, bytes, g.Group(ins), regime, link_idle,
                           charge_after_idle, link_credit);
}

double CostModelTimer::CommCpuShare(const RankGraph& g, const Instruction& ins,
                                    const CallStart& call) const {
  if (ins.comm_calls <= 0) return 0;
  const CallRegime regime = RegimeOf(g, ins, call);
  const double whole = CallSeconds(g, ins, ins.comm_bytes, regime, 0);
  return whole > 0 ? 1 - CallSeconds(g, ins, 0, regime, 0) / whole : 0;
}

double CostModelTimer::CommCpuSeconds(const RankGraph& g, const Instruction& ins) const {
  if (!ins.communicates() || ins.comm_calls <= 0) return 0;
  const proto::HostLinkCosts& link = HostCostsOf(g, ins);
  if (!link.has_call_cpu() || !PartiesShareACore(g, ins)) return 0;
  const proto::CallCpu& c = link.call_cpu();
  return ins.comm_calls *
         (c.seconds_per_call() + static_cast<double>(ins.comm_bytes) / c.bytes_per_second());
}

double CostModelTimer::BesideCallsSlowdown(const RankGraph& g, const Instruction& ins,
                                           const CallStart& call) const {
  CallStart beside = call;
  beside.beside_other_calls = true;
  if (RegimeOf(g, ins, beside) != CallRegime::kSharedCores) return 1;
  CallStart apart = call;
  apart.beside_other_calls = false;
  const double alone = CommSeconds(g, ins, apart);
  const double shared = Price(g, ins, CallRegime::kSharedCores, call.link_idle, call.link_credit);
  return alone > 0 ? std::max(1.0, shared / alone) : 1.0;
}

double CostModelTimer::SendHandOverSeconds(const RankGraph& g, const Instruction& send) const {
  const int64_t buffer = LinkOf(g, send).send_buffer_bytes();
  if (buffer <= 0 || send.comm_bytes > buffer) return -1;
  const double bandwidth = cluster_.device().memory_bandwidth();
  return bandwidth > 0 ? static_cast<double>(send.comm_bytes) / bandwidth : 0;
}

bool CostModelTimer::LinkQueuesHandedOverBytes(const RankGraph& g, const Instruction& send) const {
  return LinkOf(g, send).burst_bytes() > 0;
}

double CostModelTimer::CoreRunHorizon() const {
  const proto::SharedHost& host = cluster_.shared_host();
  return host.has_core_wait() ? host.core_wait().slice_seconds() : 0;
}

bool CostModelTimer::PartiesShareACore(const RankGraph& g, const Instruction& ins) const {
  if (ins.kind == InstructionKind::kSend || ins.kind == InstructionKind::kRecv) {
    const int pool = CorePoolOf(g.rank);
    return pool >= 0 && pool == CorePoolOf(g.Peer(ins));
  }
  std::unordered_set<int> pools;
  for (int r : g.Group(ins)) {
    const int pool = CorePoolOf(r);
    if (pool >= 0 && !pools.insert(pool).second) return true;
  }
  return false;
}

bool CostModelTimer::OnOneCore(const RankGraph& g, const Instruction& ins) const {
  return (ins.kind == InstructionKind::kSend || ins.kind == InstructionKind::kRecv) &&
         cluster_.shared_host().core_sharing() == proto::SharedHost::PINNED &&
         PartiesShareACore(g, ins);
}

const SharedCoreModel* CostModelTimer::shared_cores() const {
  if (cluster_.device().kind() != proto::Device::CPU ||
      cluster_.shared_host().core_sharing() == proto::SharedHost::EXCLUSIVE) {
    return nullptr;
  }
  return this;
}

int CostModelTimer::CorePool(const RankGraph& g) const { return CorePoolOf(g.rank); }

int CostModelTimer::CorePoolOf(int rank) const {
  const proto::Device& d = cluster_.device();
  const proto::SharedHost& host = cluster_.shared_host();
  if (d.kind() != proto::Device::CPU || host.core_sharing() == proto::SharedHost::EXCLUSIVE) {
    return -1;
  }
  const int per_device = cluster_.ranks_per_device();
  if (host.core_sharing() == proto::SharedHost::PINNED) {
    // One pool per core, holding the ranks pinned to it.
    if (host.host_cores() > 0) return rank % host.host_cores();
    const int cores = std::max(1, d.cores());
    const int device = per_device == 0 ? 0 : rank / per_device;
    const int on_device = per_device == 0 ? rank : rank % per_device;
    return device * cores + on_device % cores;
  }
  // Nodes emulated on one host share its cores; otherwise a device's.
  if (host.host_cores() > 0) return 0;
  return per_device == 0 ? 0 : rank / per_device;
}

double CostModelTimer::PoolCores(int) const {
  const proto::SharedHost& host = cluster_.shared_host();
  if (host.core_sharing() == proto::SharedHost::PINNED) return 1;
  return host.host_cores() > 0 ? host.host_cores() : cluster_.device().cores();
}

double CostModelTimer::CommSlowdown(int) const { return cluster_.comm_compute_slowdown(); }

double CostModelTimer::ComputeCommSlowdown(int) const {
  return cluster_.shared_host().compute_comm_slowdown();
}

double CostModelTimer::SharedCoreSlowdown(int) const {
  // core_wait prices the same slices at the calls where ranks meet: charged
  // twice, loopback's four-rank rows ran 7.5% mean, 18.8% max long
  // (docs/simulator_accuracy.md).
  const proto::SharedHost& host = cluster_.shared_host();
  if (host.has_core_wait() || !host.has_shared_core_lockstep()) return 1.0;
  return host.shared_core_lockstep() / compute_scale_;
}

}  // namespace loom
