// The cost model as the simulator's InstructionTimer: compute priced by the
// op cost model (profiled table, scaled neighbour, roofline), communication
// by the alpha-beta model over the link level its group spans. On a CPU
// cluster whose ranks share cores it is also the SharedCoreModel
// (shared_cores()), the cores taken from the cluster; a GPU cluster has
// none. Lives here, not in cost_model/, so that neither the scheduler nor
// the cost model depends on the other.
#ifndef LOOM_RUNTIME_COST_MODEL_TIMER_H_
#define LOOM_RUNTIME_COST_MODEL_TIMER_H_

#include <array>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cost_model/cost_context.h"
#include "scheduler/simulator.h"

namespace loom {

class CostModelTimer : public InstructionTimer, public SharedCoreModel {
 public:
  // Prices every distinct op of `graph` up front, so that an op the model
  // cannot price fails here, naming it, and Seconds() only looks up. Where
  // the graph's ranks compute on two cores or more, compute costs the
  // cluster's lockstep_slowdown times the op's price.
  static StatusOr<std::unique_ptr<CostModelTimer>> Create(
      const ExecutionGraph& graph, const CostContext& costs,
      CommAlgorithm algorithm = CommAlgorithm::kDirect);

  double Seconds(const RankGraph& rank, const Instruction& ins) const override;
  // A call whose first party waited longer than kSleptSeconds for the last
  // is priced at the link's after_wait costs: that party slept. Its first
  // call of the op gets the credit a shaped link's bucket gathered while
  // idle (CommModel::CommSeconds); the op's further calls follow at once.
  // A call whose parties' cores are shared with other ranks (PINNED ranks
  // outnumbering cores), starting while another rank's call runs on a
  // party's core, takes the link's shared_cores costs where it has them.
  // Else a call whose parties' cores do not halt takes the link's awake
  // costs: every party's core computes as it starts, or each party's core
  // is shared with another rank, or its parties arrive together (within
  // kSleptSeconds), each rank's executor then yielding on its core until
  // the call ends. Where the cluster has core_wait, a
  // collective that starts on busy cores, not at shared_cores costs, also
  // waits core_wait.waits times for the compute there, each at most a
  // slice (cluster.proto, CoreWait).
  double CommSeconds(const RankGraph& rank, const Instruction& ins,
                     const CallStart& call) const override;
  // Gloo waits on a condition variable without spinning, so a party that
  // waits at all sleeps; parties that start a call together arrive within
  // tens of microseconds of each other. Above this wait, one slept.
  static constexpr double kSleptSeconds = 50e-6;
  // This, where the cluster's ranks compute on CPU cores they may share
  // (a CPU device, core sharing other than EXCLUSIVE); else null.
  const SharedCoreModel* shared_cores() const override;
  int CorePool(const RankGraph& rank) const override;
  double PoolCores(int pool) const override;
  double CommSlowdown(int pool) const override;
  double ComputeCommSlowdown(int pool) const override;
  // shared_core_lockstep over the lockstep_slowdown already in every
  // compute price: the shared cores' lockstep in its place. 1 where the
  // cluster has core_wait, which prices the OS's slices where ranks meet.
  double SharedCoreSlowdown(int pool) const override;
  // 1 - (the call's price at zero bytes) / (its price): what is not the
  // link's latency is bytes moving, which on a CPU host copies them.
  double CommCpuShare(const RankGraph& rank, const Instruction& ins,
                      const CallStart& call) const override;
  // The link's call_cpu for each of the op's calls of its bytes; 0 where
  // the link has none.
  double CommCpuSeconds(const RankGraph& rank, const Instruction& ins) const override;
  // core_wait's slice: a call waits for a core's compute at most that long.
  double CoreRunHorizon() const override;
  double BesideCallsSlowdown(const RankGraph& rank, const Instruction& ins,
                             const CallStart& call) const override;
  // A send within its link's send_buffer_bytes hands its bytes over at the
  // device's memory bandwidth (a copy into the socket's buffer).
  double SendHandOverSeconds(const RankGraph& rank, const Instruction& send) const override;
  // A link shaped by a token bucket (Link.burst_bytes) queues them.
  bool LinkQueuesHandedOverBytes(const RankGraph& rank, const Instruction& send) const override;
  // On a link shaped by a token bucket, the credit the call leaves in it
  // (seconds of refill), which the link's next call starts with beside
  // what its idle time refills: a small call does not empty the bucket.
  double LinkCreditAfter(const RankGraph& rank, const Instruction& ins,
                         const CallStart& call) const override;

  // How many distinct signatures each rule priced (profiled, scaled,
  // roofline), for the summary line.
  const std::array<int, 3>& rule_counts() const { return rule_counts_; }

 private:
  CostModelTimer(const CostContext& costs, CommAlgorithm algorithm)
      : comm_(costs.comm()), cluster_(costs.cluster()), algorithm_(algorithm) {}

  // `link_idle` and `link_credit` as CallStart has them.
  double Price(const RankGraph& rank, const Instruction& ins, CallRegime regime, double link_idle,
               double link_credit = 0) const;
  // The core pool of global rank `rank` (CorePool's rule), and whether
  // every party of `ins` sits on a pool other ranks share.
  int CorePoolOf(int rank) const;
  // Which of the link's costs price `ins` starting as `call` says.
  CallRegime RegimeOf(const RankGraph& rank, const Instruction& ins, const CallStart& call) const;
  // The link `ins` communicates over.
  const proto::Link& LinkOf(const RankGraph& rank, const Instruction& ins) const;
  // Its costs on shared cores (Cluster.shared_host).
  const proto::HostLinkCosts& HostCostsOf(const RankGraph& rank, const Instruction& ins) const;
  bool CoresShared(const RankGraph& rank, const Instruction& ins) const;
  // A send or recv between two ranks pinned to the same core.
  bool OnOneCore(const RankGraph& rank, const Instruction& ins) const;
  // Two of the call's parties compute on one core pool: their threads'
  // CPU for the call serializes there.
  bool PartiesShareACore(const RankGraph& rank, const Instruction& ins) const;
  // One call of communicating `ins`, of `bytes`.
  double CallSeconds(const RankGraph& rank, const Instruction& ins, int64_t bytes,
                     CallRegime regime, double link_idle, double link_credit = 0) const;
  // On a shaped link, the credit one call of `ins` leaves (seconds of
  // refill; CommModel::ShaperCreditAfter).
  double CreditAfterCall(const RankGraph& rank, const Instruction& ins, CallRegime regime,
                         double link_idle, double link_credit) const;

  CommModel comm_;
  proto::Cluster cluster_;
  CommAlgorithm algorithm_;
  // What a body's compute costs.
  struct BodyPrices {
    std::vector<double> by_signature;  // seconds, by signature index
    // What reading past the cache adds, by instruction id; empty: nothing.
    std::vector<double> cold_extra;
  };
  // On a CPU device with a cache (Device.cache_bytes): `g`'s compute
  // instructions priced by the bytes they read past their rank's share of
  // it (`cache_share`; 0: none) over those of the profile (`profiled_cold`,
  // by signature; < 0: unknown, priced as profiled), into `prices`.
  void AddColdReads(const RankGraph& g, int64_t cache_share,
                    const std::vector<double>& profiled_cold, BodyPrices* prices) const;

  std::unordered_map<const RankGraphBody*, BodyPrices> compute_;
  std::unordered_map<std::string, CommCall> kinds_;  // by op type
  std::array<int, 3> rule_counts_{};
  std::unordered_set<int> shared_pools_;  // pools holding two ranks or more
  double compute_scale_ = 1;              // lockstep_slowdown where it applies
};

}  // namespace loom

#endif  // LOOM_RUNTIME_COST_MODEL_TIMER_H_
