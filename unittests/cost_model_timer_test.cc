// How the cost-model timer tells the simulator which ranks share cores:
// one pool per core where ranks are pinned (what loom run does on the CPU),
// one pool of the host's cores where the OS time-slices them, none on GPUs;
// and how a call that starts on busy cores is priced.
#include "runtime/cost_model_timer.h"

#include <glog/logging.h>
#include <limits>
#include <utility>

#include <gtest/gtest.h>

#include "cost_model/cluster.h"
#include "cost_model/comm_model.h"
#include "cost_model/op_cost_model.h"
#include "models/gpt.h"
#include "passes/strategy.h"
#include "runtime/gpt_plan.h"
#include "scheduler/execution_graph.h"
#include "unittests/test_plan_options.h"

namespace loom {
namespace {

// The pool and pool cores of each of the 4 ranks of gpt-tiny at mp=2
// pp=2 on `cluster`.
std::vector<std::pair<int, double>> PoolsOf(const proto::Cluster& cluster) {
  const GptConfig config = GptPreset("gpt-tiny").value();
  const Plan plan =
      PlanGpt(config, OptimizerConfig(), MakeStrategy(1, 2, 2, 2, "1F1B"), {}, LocalPlanOptions())
          .value();
  const ExecutionGraph graph = LowerPlan(plan).value();
  const OpCostModel ops(cluster, CostTable());
  auto timer = CostModelTimer::Create(graph, CostContext(cluster, ops));
  EXPECT_TRUE(timer.ok()) << timer.status();
  std::vector<std::pair<int, double>> pools;
  if (!timer.ok()) return pools;
  for (const RankGraph& rank : graph.ranks) {
    const int pool = (*timer)->CorePool(rank);
    pools.emplace_back(pool, pool < 0 ? 0 : (*timer)->PoolCores(pool));
  }
  return pools;
}

using Pools = std::vector<std::pair<int, double>>;

TEST(CostModelTimer, PinnedRanksShareOnlyTheirCore) {
  // local: 2 cores, rank r on core r mod 2.
  const proto::Cluster local = LoadCluster("local").value();
  ASSERT_EQ(local.shared_host().core_sharing(), proto::SharedHost::PINNED);
  EXPECT_EQ(PoolsOf(local), (Pools{{0, 1}, {1, 1}, {0, 1}, {1, 1}}));
  // emulated: every node on the host's 2 cores, pinned the same way.
  EXPECT_EQ(PoolsOf(LoadCluster("emulated").value()), (Pools{{0, 1}, {1, 1}, {0, 1}, {1, 1}}));
  // Three cores: ranks 0 and 3 take turns on core 0.
  proto::Cluster three = local;
  three.mutable_device()->set_cores(3);
  EXPECT_EQ(PoolsOf(three), (Pools{{0, 1}, {1, 1}, {2, 1}, {0, 1}}));
}

TEST(CostModelTimer, TimeSlicedRanksShareTheHostsCores) {
  proto::Cluster local = LoadCluster("local").value();
  local.mutable_shared_host()->set_core_sharing(proto::SharedHost::TIME_SLICED);
  local.mutable_shared_host()->clear_core_wait();  // (for pinned ranks only)
  EXPECT_EQ(PoolsOf(local), (Pools{{0, 2}, {0, 2}, {0, 2}, {0, 2}}));
  // A GPU rank shares nothing.
  EXPECT_EQ(PoolsOf(LoadCluster("h100").value()), (Pools{{-1, 0}, {-1, 0}, {-1, 0}, {-1, 0}}));
}

// What of a call is not the link's latency moves bytes: more of a larger
// call. gpt-tiny's mp all-reduces at batch 8 and 64 on local's loopback.
TEST(CostModelTimer, TheCpuShareOfACallGrowsWithItsBytes) {
  const proto::Cluster local = LoadCluster("local").value();
  auto mp_share = [&](int batch) {
    GptConfig config = GptPreset("gpt-tiny").value();
    config.batch_size = batch;
    const Plan plan =
        PlanGpt(config, OptimizerConfig(), MakeStrategy(1, 2, 1, 1, "1F1B"), {}, LocalPlanOptions())
            .value();
    const ExecutionGraph graph = LowerPlan(plan).value();
    const OpCostModel ops(local, CostTable());
    auto timer = CostModelTimer::Create(graph, CostContext(local, ops)).value();
    const RankGraph& rank = graph.ranks[0];
    for (const Instruction& ins : rank.instructions()) {
      if (ins.op_type == "allreduce" && ins.ring == kMpRing) {
        return timer->CommCpuShare(rank, ins, CallStart{});
      }
    }
    ADD_FAILURE() << "no mp all-reduce";
    return -1.0;
  };
  const double small = mp_share(8), large = mp_share(64);
  EXPECT_GT(small, 0);
  EXPECT_LT(small, large);
  EXPECT_LT(large, 1);
}

// The first mp all-reduce of `rank`.
const Instruction& FirstMpAllReduce(const RankGraph& rank) {
  for (const Instruction& ins : rank.instructions()) {
    if (ins.op_type == "allreduce" && ins.ring == kMpRing) return ins;
  }
  LOG(FATAL) << "no mp all-reduce on rank " << rank.rank;
}

// gpt-tiny at `mp` over `pp` stages of `micro_batches`, 1F1B, lowered.
ExecutionGraph TinyGraph(int mp, int pp, int micro_batches) {
  const Plan plan = PlanGpt(GptPreset("gpt-tiny").value(), OptimizerConfig(),
                            MakeStrategy(1, mp, pp, micro_batches, "1F1B"), {}, LocalPlanOptions())
                        .value();
  return LowerPlan(plan).value();
}

// The same at mp=2.
ExecutionGraph TinyMpGraph(int pp, int micro_batches) { return TinyGraph(2, pp, micro_batches); }

// A call's own CPU is the link's call_cpu for each of its calls of its
// bytes where two of its parties share a core (their threads' CPU for it
// serializes there), none where each party has a core of its own, and
// none where the link does not say.
TEST(CostModelTimer, ACallsCpuIsChargedWhereTwoOfItsPartiesShareACore) {
  proto::Cluster local = LoadCluster("local").value();
  local.mutable_shared_host()->mutable_intra_node()->clear_call_cpu();
  // mp=2 x pp=2 on local's 2 cores: ranks 0 and 2 on core 0, 1 and 3 on 1.
  const ExecutionGraph graph = TinyGraph(2, 2, 2);
  const RankGraph& rank = graph.ranks[0];
  const OpCostModel ops(local, CostTable());
  EXPECT_EQ(CostModelTimer::Create(graph, CostContext(local, ops))
                .value()
                ->CommCpuSeconds(rank, FirstMpAllReduce(rank)),
            0);
  proto::CallCpu* cpu = local.mutable_shared_host()->mutable_intra_node()->mutable_call_cpu();
  cpu->set_seconds_per_call(400e-6);
  cpu->set_bytes_per_second(1e9);
  const OpCostModel priced(local, CostTable());
  auto timer = CostModelTimer::Create(graph, CostContext(local, priced)).value();
  auto charged = [](const Instruction& ins) {
    return ins.comm_calls * (400e-6 + static_cast<double>(ins.comm_bytes) / 1e9);
  };
  int sends = 0, mp_calls = 0;
  for (const Instruction& ins : rank.instructions()) {
    if (ins.kind == InstructionKind::kCompute) {
      EXPECT_EQ(timer->CommCpuSeconds(rank, ins), 0);
    } else if (ins.kind == InstructionKind::kSend || ins.kind == InstructionKind::kRecv) {
      // To and from rank 2, on rank 0's core.
      ASSERT_EQ(rank.Peer(ins), 2);
      EXPECT_DOUBLE_EQ(timer->CommCpuSeconds(rank, ins), charged(ins)) << ins.op_type;
      ++sends;
    } else if (ins.communicates() && ins.ring == kMpRing && ins.comm_calls > 0) {
      // With rank 1, on the other core.
      EXPECT_EQ(timer->CommCpuSeconds(rank, ins), 0) << ins.op_type;
      ++mp_calls;
    }
  }
  EXPECT_GT(sends, 0);
  EXPECT_GT(mp_calls, 0);
  // mp=4 on 2 cores: every all-reduce has two parties on each core.
  const ExecutionGraph mp4 = TinyGraph(4, 1, 1);
  auto mp4_timer = CostModelTimer::Create(mp4, CostContext(local, priced)).value();
  const Instruction& call = FirstMpAllReduce(mp4.ranks[0]);
  EXPECT_DOUBLE_EQ(mp4_timer->CommCpuSeconds(mp4.ranks[0], call), charged(call));
}

// `local` with distinct awake costs: 5 us and 8 GB/s.
proto::Cluster LocalWithAwakeCosts() {
  proto::Cluster local = LoadCluster("local").value();
  local.mutable_shared_host()->clear_core_wait();
  proto::WaitedCosts* awake = local.mutable_shared_host()->mutable_intra_node()->mutable_awake();
  awake->set_latency_seconds(5e-6);
  awake->set_bandwidth(8e9);
  return local;
}

// A call that starts on busy cores takes the link's awake costs; where the
// cluster has core_wait it also waits for the compute there, each wait cut
// at the slice. A call on idle cores whose parties arrive together takes
// the awake costs too (the executor yields on the cores until it ends);
// one whose first party slept, after_wait's; without awake costs measured,
// the link's own.
TEST(CostModelTimer, ACallOnBusyCoresWaitsForThemUpToASliceEach) {
  const proto::Cluster local = LocalWithAwakeCosts();
  const ExecutionGraph graph = TinyMpGraph(1, 1);
  const OpCostModel ops(local, CostTable());
  const RankGraph& rank = graph.ranks[0];
  const Instruction& call = FirstMpAllReduce(rank);
  auto price = [&](const proto::Cluster& cluster, double busy_for, double waited = 0) {
    auto timer = CostModelTimer::Create(graph, CostContext(cluster, ops)).value();
    CallStart start;
    start.cores_busy_for = busy_for;
    start.waited = waited;
    return timer->CommSeconds(rank, call, start);
  };
  const CommModel comm(local);
  const std::vector<int> pair = {0, 1};
  auto at = [&](CallRegime regime) {
    return comm.CommSeconds(CommCall::kAllReduce, CommAlgorithm::kDirect, call.comm_bytes, pair,
                            regime);
  };
  const double idle = at(CallRegime::kTogether);
  const double awake = at(CallRegime::kAwake);
  ASSERT_LT(awake, idle);
  ASSERT_NE(at(CallRegime::kAfterWait), awake);
  EXPECT_DOUBLE_EQ(price(local, -1), awake);
  EXPECT_DOUBLE_EQ(price(local, -1, 1e-3), at(CallRegime::kAfterWait));
  EXPECT_DOUBLE_EQ(price(local, 1e-3), awake);  // no core_wait: no wait
  EXPECT_DOUBLE_EQ(price(local, 1e-3, 1e-3), awake);
  proto::Cluster unmeasured = local;
  unmeasured.mutable_shared_host()->mutable_intra_node()->clear_awake();
  EXPECT_DOUBLE_EQ(price(unmeasured, -1), idle);
  proto::Cluster waiting = local;
  waiting.mutable_shared_host()->mutable_core_wait()->set_waits(2);
  waiting.mutable_shared_host()->mutable_core_wait()->set_slice_seconds(1e-3);
  ASSERT_TRUE(ValidateCluster(waiting).ok());
  EXPECT_DOUBLE_EQ(price(waiting, -1), awake);
  EXPECT_NEAR(price(waiting, 0), awake, 1e-15);
  EXPECT_NEAR(price(waiting, 0.4e-3), awake + 0.8e-3, 1e-15);
  EXPECT_NEAR(price(waiting, 5e-3), awake + 2e-3, 1e-15);  // two slices at most
}

// Ranks that compute on two cores meet at the slower one's pace: their
// compute costs lockstep_slowdown times the op's price; ranks that take
// turns on one core, or GPUs, never wait for another core.
TEST(CostModelTimer, RanksOnTwoCoresComputeAtTheLockstepSlowdown) {
  const ExecutionGraph graph = TinyMpGraph(1, 1);
  const RankGraph& rank = graph.ranks[0];
  const Instruction* matmul = nullptr;
  for (const Instruction& ins : rank.instructions()) {
    if (ins.op_type == "matmul") matmul = &ins;
  }
  ASSERT_NE(matmul, nullptr);
  auto price = [&](proto::Cluster cluster, double lockstep) {
    cluster.mutable_shared_host()->set_lockstep_slowdown(lockstep);
    EXPECT_TRUE(ValidateCluster(cluster).ok());
    const OpCostModel ops(cluster, CostTable());
    return CostModelTimer::Create(graph, CostContext(cluster, ops)).value()->Seconds(rank, *matmul);
  };
  const proto::Cluster local = LoadCluster("local").value();
  ASSERT_GE(local.device().cores(), 2);
  EXPECT_GT(price(local, 1), 0);
  EXPECT_DOUBLE_EQ(price(local, 1.25), 1.25 * price(local, 1));
  proto::Cluster one_core = local;
  one_core.mutable_device()->set_cores(1);
  EXPECT_DOUBLE_EQ(price(one_core, 1.25), price(one_core, 1));
  // A GPU cluster has no shared host (validation refuses one), so no
  // lockstep to slow its compute by.
  EXPECT_FALSE(LoadCluster("h100")->has_shared_host());
}

// Compute that shares its core with another rank's meets at the shared
// cores' lockstep in place of lockstep_slowdown, which every compute price
// already carries; without a measurement, or where the cluster's core_wait
// prices the OS's slices at the calls, it is not slowed again.
TEST(CostModelTimer, ComputeOnSharedCoresTakesTheSharedCoreLockstep) {
  const ExecutionGraph graph = TinyMpGraph(2, 2);
  proto::Cluster local = LoadCluster("local").value();
  local.mutable_shared_host()->set_lockstep_slowdown(1.05);
  auto slowdown = [&](const proto::Cluster& cluster) {
    EXPECT_TRUE(ValidateCluster(cluster).ok());
    const OpCostModel ops(cluster, CostTable());
    auto timer = CostModelTimer::Create(graph, CostContext(cluster, ops)).value();
    return timer->SharedCoreSlowdown(timer->CorePool(graph.ranks[0]));
  };
  local.mutable_shared_host()->clear_core_wait();
  EXPECT_DOUBLE_EQ(slowdown(local), 1);
  local.mutable_shared_host()->set_shared_core_lockstep(1.26);
  EXPECT_DOUBLE_EQ(slowdown(local), 1.2);
  // Where core_wait prices the slices at the calls, not again here.
  local.mutable_shared_host()->mutable_core_wait()->set_waits(2);
  local.mutable_shared_host()->mutable_core_wait()->set_slice_seconds(3e-3);
  EXPECT_DOUBLE_EQ(slowdown(local), 1);
}

// A transfer waits for busy cores as a collective does: the receiver's
// thread must get its core before the bytes move. Not where sender and
// receiver are pinned to one core: the sender holds it, and hands it over.
TEST(CostModelTimer, ATransferOnBusyCoresWaitsForThemToo) {
  proto::Cluster waiting = LocalWithAwakeCosts();
  waiting.mutable_shared_host()->mutable_core_wait()->set_waits(2);
  waiting.mutable_shared_host()->mutable_core_wait()->set_slice_seconds(1e-3);
  // The extra of compute lasting 0.4 ms on the cores as rank 0's first
  // send starts, over none.
  auto waited = [&](int mp, int pp) {
    const ExecutionGraph graph = TinyGraph(mp, pp, 2);
    const OpCostModel ops(waiting, CostTable());
    auto timer = CostModelTimer::Create(graph, CostContext(waiting, ops)).value();
    const RankGraph& rank = graph.ranks[0];
    const Instruction* send = nullptr;
    for (const Instruction& ins : rank.instructions()) {
      if (ins.kind == InstructionKind::kSend) {
        send = &ins;
        break;
      }
    }
    EXPECT_NE(send, nullptr);
    if (send == nullptr) return -1.0;
    CallStart at_once, after;
    at_once.cores_busy_for = 0;
    after.cores_busy_for = 0.4e-3;
    return timer->CommSeconds(rank, *send, after) - timer->CommSeconds(rank, *send, at_once);
  };
  EXPECT_NEAR(waited(1, 2), 0.8e-3, 1e-12);  // ranks 0 and 1 on cores 0 and 1
  EXPECT_DOUBLE_EQ(waited(2, 2), 0);         // rank 0 sends to rank 2, on core 0 too
}

// Two pinned ranks on two cores each hold a core alone: a call whose first
// party slept waking it pays after_wait's costs. Four share them two by
// two, which keeps the cores awake: the awake costs, whatever the cores do
// as the call starts. Parties that arrive together take the awake costs
// either way (the executor yields on their cores until the call ends).
TEST(CostModelTimer, RanksThatShareTheirCoresCallAtTheAwakeCosts) {
  const proto::Cluster local = LocalWithAwakeCosts();
  const CommModel comm(local);
  auto price = [&](int pp, double waited) {
    const ExecutionGraph graph = TinyMpGraph(pp, 2);
    const OpCostModel ops(local, CostTable());
    auto timer = CostModelTimer::Create(graph, CostContext(local, ops)).value();
    const RankGraph& rank = graph.ranks[0];
    const Instruction& call = FirstMpAllReduce(rank);
    CallStart start;
    start.waited = waited;
    const double priced = timer->CommSeconds(rank, call, start);
    const CallRegime regime =
        pp == 1 && waited > CostModelTimer::kSleptSeconds ? CallRegime::kAfterWait
                                                          : CallRegime::kAwake;
    EXPECT_DOUBLE_EQ(priced, comm.CommSeconds(CommCall::kAllReduce, CommAlgorithm::kDirect,
                                              call.comm_bytes, rank.Group(call), regime))
        << "pp=" << pp;
    // Its CPU share too is of the costs it is priced at.
    const double latency = comm.CommSeconds(CommCall::kAllReduce, CommAlgorithm::kDirect, 0,
                                            rank.Group(call), regime);
    EXPECT_DOUBLE_EQ(timer->CommCpuShare(rank, call, start), 1 - latency / priced)
        << "pp=" << pp;
    return priced;
  };
  EXPECT_DOUBLE_EQ(price(2, 0), price(1, 0));
  EXPECT_LT(price(2, 1e-3), price(1, 1e-3));
}

// Four ranks on two cores: a call that starts beside another rank's call
// on a party's core takes the link's shared_cores costs, and no core_wait
// on top (it was measured beside calls, not compute); otherwise the awake
// costs, with core_wait on busy cores. Beside a call that ends sooner, the
// shared costs for that part of its time and its costs apart for the rest.
// Two ranks on two cores do not share theirs: never the shared costs. A call
// that another joins on shared cores is slowed by the same ratio.
TEST(CostModelTimer, ACallBesideAnotherRanksCallOnSharedCoresTakesTheSharedCosts) {
  proto::Cluster local = LocalWithAwakeCosts();
  proto::WaitedCosts* shared =
      local.mutable_shared_host()->mutable_intra_node()->mutable_shared_cores();
  shared->set_latency_seconds(1e-3);
  shared->set_bandwidth(1e9);
  local.mutable_shared_host()->mutable_core_wait()->set_waits(2);
  local.mutable_shared_host()->mutable_core_wait()->set_slice_seconds(1e-3);
  ASSERT_TRUE(ValidateCluster(local).ok()) << ValidateCluster(local);
  const CommModel comm(local);
  auto price = [&](int pp, bool beside, double busy_for,
                   double beside_for = std::numeric_limits<double>::infinity()) {
    const ExecutionGraph graph = TinyMpGraph(pp, 2);
    const OpCostModel ops(local, CostTable());
    auto timer = CostModelTimer::Create(graph, CostContext(local, ops)).value();
    const RankGraph& rank = graph.ranks[0];
    CallStart start;
    start.beside_other_calls = beside;
    start.other_calls_for = beside_for;
    start.cores_busy_for = busy_for;
    return timer->CommSeconds(rank, FirstMpAllReduce(rank), start);
  };
  const ExecutionGraph graph = TinyMpGraph(2, 2);
  const Instruction& call = FirstMpAllReduce(graph.ranks[0]);
  const std::vector<int> pair = graph.ranks[0].Group(call);
  auto at = [&](CallRegime regime) {
    return comm.CommSeconds(CommCall::kAllReduce, CommAlgorithm::kDirect, call.comm_bytes,
                            pair, regime);
  };
  EXPECT_DOUBLE_EQ(price(2, true, -1), at(CallRegime::kSharedCores));
  EXPECT_DOUBLE_EQ(price(2, true, 5e-3), at(CallRegime::kSharedCores));
  EXPECT_DOUBLE_EQ(price(2, false, -1), at(CallRegime::kAwake));
  EXPECT_NEAR(price(2, false, 5e-3), at(CallRegime::kAwake) + 2e-3, 1e-15);
  EXPECT_GT(at(CallRegime::kSharedCores), at(CallRegime::kAwake));
  const double shared_for = at(CallRegime::kSharedCores);
  EXPECT_DOUBLE_EQ(price(2, true, -1, 2 * shared_for), shared_for);
  EXPECT_NEAR(price(2, true, -1, shared_for / 4),
              at(CallRegime::kAwake) + (shared_for - at(CallRegime::kAwake)) / 4, 1e-15);
  // The part apart waits for the busy cores.
  const double apart = at(CallRegime::kAwake) + 2e-3;
  EXPECT_NEAR(price(2, true, 5e-3, shared_for / 2), apart + (shared_for - apart) / 2, 1e-15);
  // pp=1: ranks 0 and 1 hold a core each: never the shared costs.
  EXPECT_DOUBLE_EQ(price(1, true, -1), at(CallRegime::kAwake));
  // A call already running when another joins it is slowed by the ratio of
  // its shared costs to its costs apart (core wait included), never sped up.
  auto slowdown = [&](int pp, double busy_for) {
    const ExecutionGraph g = TinyMpGraph(pp, 2);
    const OpCostModel ops(local, CostTable());
    auto timer = CostModelTimer::Create(g, CostContext(local, ops)).value();
    CallStart start;
    start.cores_busy_for = busy_for;
    return timer->BesideCallsSlowdown(g.ranks[0], FirstMpAllReduce(g.ranks[0]), start);
  };
  EXPECT_DOUBLE_EQ(slowdown(2, -1), shared_for / at(CallRegime::kAwake));
  EXPECT_DOUBLE_EQ(slowdown(2, 5e-3), std::max(1.0, shared_for / apart));
  EXPECT_DOUBLE_EQ(slowdown(1, -1), 1);
}

// The simulator's idle time of a call's links reaches the model: after a
// longer idle the call takes the link's after_idle extra, on top of its
// regime's costs, where each party has its core to itself.
TEST(CostModelTimer, ACallAfterItsLinkIdledTakesTheExtraMeasuredForThat) {
  proto::Cluster local = LocalWithAwakeCosts();
  for (auto [idle, extra] : {std::pair{0.5e-3, 0.0}, std::pair{5e-3, 1e-3}}) {
    proto::IdleCost* p = local.mutable_intra_node()->add_after_idle();
    p->set_idle_seconds(idle);
    p->set_extra_seconds(extra);
  }
  ASSERT_TRUE(ValidateCluster(local).ok()) << ValidateCluster(local);
  const ExecutionGraph graph = TinyMpGraph(1, 1);
  const OpCostModel ops(local, CostTable());
  auto timer = CostModelTimer::Create(graph, CostContext(local, ops)).value();
  const RankGraph& rank = graph.ranks[0];
  const Instruction& call = FirstMpAllReduce(rank);
  auto price = [&](double link_idle, double busy_for) {
    CallStart start;
    start.link_idle = link_idle;
    start.cores_busy_for = busy_for;
    return timer->CommSeconds(rank, call, start);
  };
  EXPECT_NEAR(price(5e-3, -1) - price(0, -1), 1e-3, 1e-15);
  EXPECT_NEAR(price(2.75e-3, 1e-3) - price(0, 1e-3), 0.5e-3, 1e-15);  // awake, half way
  EXPECT_NEAR(price(std::numeric_limits<double>::infinity(), -1) - price(0, -1), 1e-3, 1e-15);
  // Measured with the parties arriving together: where one waited and
  // slept, the after_wait costs are the whole price.
  auto after_wait = [&](double link_idle) {
    CallStart start;
    start.link_idle = link_idle;
    start.waited = 1e-3;
    return timer->CommSeconds(rank, call, start);
  };
  EXPECT_NE(after_wait(0), price(0, -1));
  EXPECT_DOUBLE_EQ(after_wait(5e-3), after_wait(0));

  // Measured with each party on a core of its own; where each shares its
  // core with another rank (pp=2: 4 ranks on 2 cores) nothing is added.
  const ExecutionGraph shared = TinyMpGraph(2, 2);
  auto shared_timer = CostModelTimer::Create(shared, CostContext(local, ops)).value();
  auto shared_price = [&](double link_idle) {
    CallStart start;
    start.link_idle = link_idle;
    return shared_timer->CommSeconds(shared.ranks[0], FirstMpAllReduce(shared.ranks[0]), start);
  };
  EXPECT_GT(shared_price(0), 0);
  EXPECT_DOUBLE_EQ(shared_price(5e-3), shared_price(0));
}

// On a shaped link a call leaves its bucket's credit to the link's next
// call (the simulator carries it, CallStart::link_credit): after a full
// bucket a call pays no rate and leaves credit; after an empty one it pays
// the rate. An unshaped link carries nothing.
TEST(CostModelTimer, AShapedLinksCallLeavesItsCreditToTheNext) {
  proto::Cluster local = LocalWithAwakeCosts();
  const ExecutionGraph graph = TinyMpGraph(1, 1);
  const RankGraph& rank = graph.ranks[0];
  const Instruction& call = FirstMpAllReduce(rank);
  const OpCostModel ops(local, CostTable());
  auto plain = CostModelTimer::Create(graph, CostContext(local, ops)).value();
  EXPECT_EQ(plain->LinkCreditAfter(rank, call, CallStart{}), 0);

  // A bucket twice the call's wire bytes (twice its bytes on this
  // half-duplex link), refilled at 10 MB/s.
  constexpr double kRate = 10e6;
  ASSERT_TRUE(local.intra_node().half_duplex());
  local.mutable_intra_node()->set_sustained_bandwidth(kRate);
  local.mutable_intra_node()->set_burst_bytes(4 * call.comm_bytes);
  ASSERT_TRUE(ValidateCluster(local).ok()) << ValidateCluster(local);
  auto timer = CostModelTimer::Create(graph, CostContext(local, ops)).value();
  CallStart empty, full;
  full.link_credit = 1e9;  // more than the bucket holds
  const double after_full = timer->CommSeconds(rank, call, full);
  const double after_empty = timer->CommSeconds(rank, call, empty);
  EXPECT_GT(after_empty, after_full + 0.5 * call.comm_bytes / kRate);
  const double left = timer->LinkCreditAfter(rank, call, full);
  EXPECT_GT(left, 2 * call.comm_bytes / kRate);
  EXPECT_LE(left, 4 * call.comm_bytes / kRate);
  // The next call starts with what it left: between the two.
  CallStart next;
  next.link_credit = left;
  const double after_left = timer->CommSeconds(rank, call, next);
  EXPECT_GE(after_left, after_full);
  EXPECT_LT(after_left, after_empty);
}

// A send within its link's send buffer hands its bytes over at the host's
// memory bandwidth; a larger one, or any on a link without one (NCCL's),
// takes the transfer (-1).
TEST(CostModelTimer, ASendWithinTheSendBufferTakesItsHandOver) {
  proto::Cluster local = LoadCluster("local").value();
  const ExecutionGraph graph = TinyMpGraph(2, 2);
  const RankGraph& rank = graph.ranks[0];
  const Instruction* send = nullptr;
  for (const Instruction& ins : rank.instructions()) {
    if (ins.kind == InstructionKind::kSend) send = &ins;
  }
  ASSERT_NE(send, nullptr);
  ASSERT_GT(send->comm_bytes, 0);
  auto hand_over = [&](int64_t buffer) {
    local.mutable_intra_node()->set_send_buffer_bytes(buffer);
    EXPECT_TRUE(ValidateCluster(local).ok()) << ValidateCluster(local);
    const OpCostModel ops(local, CostTable());
    return CostModelTimer::Create(graph, CostContext(local, ops))
        .value()
        ->SendHandOverSeconds(rank, *send);
  };
  EXPECT_DOUBLE_EQ(hand_over(send->comm_bytes),
                   send->comm_bytes / local.device().memory_bandwidth());
  EXPECT_EQ(hand_over(send->comm_bytes - 1), -1);
  EXPECT_EQ(hand_over(0), -1);
  local.mutable_intra_node()->set_send_buffer_bytes(-1);
  EXPECT_EQ(ValidateCluster(local).message(),
            "intra_node.send_buffer_bytes must not be negative, got -1");
}

}  // namespace
}  // namespace loom
