// The α-β communication model against hand-computed values, the link level
// a group's ranks give, op types as collectives, the α-β fit, and the fit
// of a call's wait for busy cores.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "cost_model/bucket_size.h"
#include "cost_model/cluster.h"
#include "cost_model/comm_model.h"
#include "framework/op_builder.h"
#include "framework/shape_inference.h"
#include "profiling/comm_fit.h"
#include "profiling/core_wait_fit.h"

namespace loom {
namespace {

// 4 ranks per node; round numbers so the expected values are easy to check
// by hand: intra α = 1 us, β = 100 GB/s; inter α = 10 us, β = 10 GB/s.
proto::Cluster TestCluster() {
  proto::Cluster c = LoadCluster("a100").value();
  c.set_name("test");
  c.set_devices_per_node(4);
  c.mutable_intra_node()->set_latency_seconds(1e-6);
  c.mutable_intra_node()->set_bandwidth(100e9);
  c.mutable_inter_node()->set_latency_seconds(10e-6);
  c.mutable_inter_node()->set_bandwidth(10e9);
  return c;
}

// TestCluster on CPU hosts, whose ranks' cores the link's regimes
// (HostLinkCosts) are about.
proto::Cluster SharedHostTestCluster() {
  proto::Cluster c = TestCluster();
  c.mutable_device()->set_kind(proto::Device::CPU);
  c.mutable_device()->set_cores(4);
  // How a GPU tiles its products is not a CPU's.
  c.mutable_device()->clear_multiprocessors();
  c.mutable_device()->clear_gemm_tile_rows();
  c.mutable_device()->clear_gemm_tile_cols();
  return c;
}

constexpr CommCall kAllReduce = CommCall::kAllReduce;
constexpr CommCall kAllGather = CommCall::kAllGather;
constexpr CommCall kReduceScatter = CommCall::kReduceScatter;
constexpr CommCall kBroadcast = CommCall::kBroadcast;
constexpr CommCall kSend = CommCall::kSend;
constexpr CommAlgorithm kRing = CommAlgorithm::kRing;
constexpr CommAlgorithm kTree = CommAlgorithm::kTree;
constexpr CommAlgorithm kDirect = CommAlgorithm::kDirect;

const std::vector<int> kNode0 = {0, 1, 2, 3};
const std::vector<int> kAcross = {2, 3, 4, 5};

TEST(CommModel, LinkLevelFromTheRanks) {
  CommModel m(TestCluster());
  EXPECT_EQ(m.LevelOf(kNode0), LinkLevel::kIntraNode);
  EXPECT_EQ(m.LevelOf({4, 7}), LinkLevel::kIntraNode);
  EXPECT_EQ(m.LevelOf(kAcross), LinkLevel::kInterNode);
  EXPECT_EQ(m.LevelOf({0, 8}), LinkLevel::kInterNode);
}

TEST(CommModel, RingFormulas) {
  CommModel m(TestCluster());
  const int64_t gb = 1000000000;
  // allreduce: 2(n-1) α + 2(n-1)/n B/β = 6 us + 1.5 GB / 100 GB/s.
  EXPECT_DOUBLE_EQ(m.CommSeconds(kAllReduce, kRing, gb, kNode0), 6e-6 + 0.015);
  // The same group shifted across a node boundary pays the inter-node link
  // for every step: 6 x 10 us + 1.5 GB / 10 GB/s.
  EXPECT_DOUBLE_EQ(m.CommSeconds(kAllReduce, kRing, gb, kAcross), 60e-6 + 0.15);
  // allgather: (n-1) α + (n-1) B/β, B the part each rank holds.
  EXPECT_DOUBLE_EQ(m.CommSeconds(kAllGather, kRing, gb, kNode0), 3e-6 + 0.03);
  // reduce_scatter: (n-1) α + (n-1)/n B/β.
  EXPECT_DOUBLE_EQ(m.CommSeconds(kReduceScatter, kRing, gb, kNode0), 3e-6 + 0.0075);
  // broadcast, scatter + allgather: (log2 n + n - 1) α + 2(n-1)/n B/β.
  EXPECT_DOUBLE_EQ(m.CommSeconds(kBroadcast, kRing, gb, kNode0), 5e-6 + 0.015);
}

TEST(CommModel, TreeFormulas) {
  CommModel m(TestCluster());
  const int64_t mb = 1000000;
  // allreduce: 2 L α + 2 L B/β with L = log2 4 = 2.
  EXPECT_DOUBLE_EQ(m.CommSeconds(kAllReduce, kTree, mb, kNode0), 4e-6 + 4e-5);
  EXPECT_DOUBLE_EQ(m.CommSeconds(kAllGather, kTree, mb, kNode0), 2e-6 + 3e-5);
  EXPECT_DOUBLE_EQ(m.CommSeconds(kReduceScatter, kTree, mb, kNode0), 2e-6 + 0.75e-5);
  EXPECT_DOUBLE_EQ(m.CommSeconds(kBroadcast, kTree, mb, kNode0), 2e-6 + 2e-5);
  // Five ranks take ceil(log2 5) = 3 rounds, across nodes (ranks 0-4).
  EXPECT_DOUBLE_EQ(m.CommSeconds(kBroadcast, kTree, mb, {0, 1, 2, 3, 4}),
                   30e-6 + 3e-4);
}

TEST(CommModel, DirectSendAndTrivialGroups) {
  CommModel m(TestCluster());
  const int64_t mb = 1000000;
  // Loom's Gloo allreduce: 2 α + 2(n-1)/n B/β.
  EXPECT_DOUBLE_EQ(m.CommSeconds(kAllReduce, kDirect, mb, {0, 1}), 2e-6 + 1e-5);
  EXPECT_DOUBLE_EQ(m.CommSeconds(kAllGather, kDirect, mb, kNode0), 1e-6 + 3e-5);
  // send: α + B/β, whatever the algorithm; 3 -> 4 crosses nodes.
  EXPECT_DOUBLE_EQ(m.CommSeconds(kSend, kRing, mb, {3, 4}), 10e-6 + 1e-4);
  EXPECT_DOUBLE_EQ(m.CommSeconds(kSend, kTree, mb, {2, 3}), 1e-6 + 1e-5);
  EXPECT_EQ(m.CommSeconds(kAllReduce, kRing, mb, {5}), 0);
  EXPECT_EQ(m.CommSeconds(kAllReduce, kRing, mb, {}), 0);
}

TEST(CommModel, HalfDuplexDoublesTheBytesOfExchanges) {
  proto::Cluster c = TestCluster();
  c.mutable_intra_node()->set_half_duplex(true);
  CommModel m(c);
  const int64_t gb = 1000000000;
  // Ring steps send and receive at once: 6 us + 2 x 1.5 GB / 100 GB/s.
  EXPECT_DOUBLE_EQ(m.CommSeconds(kAllReduce, kRing, gb, kNode0), 6e-6 + 0.03);
  EXPECT_DOUBLE_EQ(m.CommSeconds(kReduceScatter, kTree, gb, kNode0), 2e-6 + 0.015);
  // Tree allreduce, broadcast and send go one way per step: unchanged.
  EXPECT_DOUBLE_EQ(m.CommSeconds(kAllReduce, kTree, gb, kNode0), 4e-6 + 0.04);
  EXPECT_DOUBLE_EQ(m.CommSeconds(kBroadcast, kRing, gb, kNode0), 5e-6 + 0.015);
  EXPECT_DOUBLE_EQ(m.CommSeconds(kSend, kRing, gb, {0, 1}), 1e-6 + 0.01);
  // The inter-node link stays full duplex.
  EXPECT_DOUBLE_EQ(m.CommSeconds(kAllReduce, kRing, gb, kAcross), 60e-6 + 0.15);
}

// A collective's own α-β replaces the link's; a call whose parties waited
// uses the after_wait costs where the link has them.
TEST(CommModel, PerCollectiveAndAfterWaitCosts) {
  proto::Cluster c = SharedHostTestCluster();
  proto::CollectiveCost* ar = c.mutable_intra_node()->add_collective();
  ar->set_kind("allreduce");
  ar->set_latency_seconds(3e-6);
  ar->set_bandwidth(50e9);
  proto::CollectiveCost* send =
      c.mutable_shared_host()->mutable_intra_node()->mutable_after_wait()->add_collective();
  send->set_kind("send");
  send->set_latency_seconds(7e-6);
  send->set_bandwidth(20e9);
  c.mutable_shared_host()->mutable_intra_node()->mutable_after_wait()->set_latency_seconds(5e-6);
  c.mutable_shared_host()->mutable_intra_node()->mutable_after_wait()->set_bandwidth(25e9);
  ASSERT_TRUE(ValidateCluster(c).ok()) << ValidateCluster(c);
  CommModel m(c);
  const int64_t mb = 1000000;
  EXPECT_DOUBLE_EQ(m.CommSeconds(kAllReduce, kDirect, mb, {0, 1}), 6e-6 + 2e-5);
  EXPECT_DOUBLE_EQ(m.CommSeconds(kAllGather, kDirect, mb, {0, 1}), 1e-6 + 1e-5);
  EXPECT_DOUBLE_EQ(m.CommSeconds(kSend, kDirect, mb, {0, 1}), 1e-6 + 1e-5);
  // After a wait: send (and recv, its other end) have their own; the
  // others take the after_wait link values.
  const CallRegime waited = CallRegime::kAfterWait;
  EXPECT_DOUBLE_EQ(m.CommSeconds(kSend, kDirect, mb, {0, 1}, waited), 7e-6 + 5e-5);
  EXPECT_DOUBLE_EQ(m.CommSeconds(CommCall::kRecv, kDirect, mb, {0, 1}, waited), 7e-6 + 5e-5);
  EXPECT_DOUBLE_EQ(m.CommSeconds(kAllReduce, kDirect, mb, {0, 1}, waited), 10e-6 + 4e-5);
  // The inter-node link has no after_wait: waiting changes nothing there.
  EXPECT_DOUBLE_EQ(m.CommSeconds(kSend, kDirect, mb, {3, 4}, CallRegime::kAfterWait),
                   m.CommSeconds(kSend, kDirect, mb, {3, 4}));
}

// On awake cores a call takes the link's awake costs, where it has them.
TEST(CommModel, AwakeCosts) {
  proto::Cluster c = SharedHostTestCluster();
  c.mutable_shared_host()->mutable_intra_node()->mutable_awake()->set_latency_seconds(2e-6);
  c.mutable_shared_host()->mutable_intra_node()->mutable_awake()->set_bandwidth(100e9);
  ASSERT_TRUE(ValidateCluster(c).ok()) << ValidateCluster(c);
  CommModel m(c);
  const int64_t mb = 1000000;
  // Direct all-reduce of two: two latencies, the bytes once.
  EXPECT_DOUBLE_EQ(m.CommSeconds(kAllReduce, kDirect, mb, {0, 1}, CallRegime::kAwake),
                   4e-6 + 1e-5);
  // The inter-node link has none: its own costs.
  EXPECT_DOUBLE_EQ(m.CommSeconds(kSend, kDirect, mb, {3, 4}, CallRegime::kAwake),
                   m.CommSeconds(kSend, kDirect, mb, {3, 4}));
}

// Beside another rank's call on shared cores a call takes the link's
// shared_cores costs, where it has them.
TEST(CommModel, SharedCoresCosts) {
  proto::Cluster c = SharedHostTestCluster();
  c.mutable_shared_host()->mutable_intra_node()->mutable_shared_cores()->set_latency_seconds(1e-3);
  c.mutable_shared_host()->mutable_intra_node()->mutable_shared_cores()->set_bandwidth(1e9);
  ASSERT_TRUE(ValidateCluster(c).ok()) << ValidateCluster(c);
  CommModel m(c);
  const int64_t mb = 1000000;
  EXPECT_DOUBLE_EQ(m.CommSeconds(kAllReduce, kDirect, mb, {0, 1}, CallRegime::kSharedCores),
                   2e-3 + 1e-3);
  EXPECT_DOUBLE_EQ(m.CommSeconds(kSend, kDirect, mb, {3, 4}, CallRegime::kSharedCores),
                   m.CommSeconds(kSend, kDirect, mb, {3, 4}));
}

// A shaped link's token bucket lets small calls leave at the fitted rate
// but holds a long transfer to the sustained one.
TEST(CommModel, SustainedBandwidthBoundsLongTransfersOnly) {
  proto::Cluster c = TestCluster();
  c.mutable_inter_node()->set_sustained_bandwidth(1e9);
  ASSERT_TRUE(ValidateCluster(c).ok()) << ValidateCluster(c);
  CommModel m(c);
  const std::vector<int> pair = {3, 4};
  // 1 KB: 10 us + 0.1 us by the fit, 1 us at the sustained rate.
  EXPECT_DOUBLE_EQ(m.CommSeconds(kSend, kDirect, 1000, pair), 10e-6 + 1e-7);
  // 1 GB: 0.1 s by the fit, 1 s at the sustained rate.
  EXPECT_DOUBLE_EQ(m.CommSeconds(kSend, kDirect, 1000000000, pair), 1.0);
  // An allreduce's bytes on the wire (2 (n-1)/n of them) set its bound.
  EXPECT_DOUBLE_EQ(m.WireBytes(kAllReduce, kDirect, 1000000000, pair), 1e9);
  EXPECT_DOUBLE_EQ(m.CommSeconds(kAllReduce, kDirect, 1000000000, pair), 1.0);
  // The intra-node link has none: unchanged.
  EXPECT_DOUBLE_EQ(m.CommSeconds(kSend, kDirect, 1000000000, {0, 1}), 1e-6 + 0.01);
  c.mutable_inter_node()->set_sustained_bandwidth(-1);
  Status bad = ValidateCluster(c);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("inter_node.sustained_bandwidth"), std::string::npos) << bad;
}

// A shaper's bucket refills while a call waits out its steps' latencies: a
// small call pays them, not the rate, for what that refill covers.
TEST(CommModel, ShapedLinkRefillsDuringEachStepsLatency) {
  proto::Cluster c = TestCluster();
  proto::Link* link = c.mutable_inter_node();
  link->set_sustained_bandwidth(1e9);  // 1 GB/s: 10 kB a 10 us latency
  link->set_burst_bytes(20000);
  CommModel m(c);
  const std::vector<int> pair = {3, 4};
  // A direct allreduce of 40 kB, 2 steps of 20 kB. Back to back (no
  // credit): 10 us + 20 us at the rate, then 10 us + the 10 kB that the
  // first step's refill (30 us, less its 20 kB) does not cover. The
  // latencies added to the whole call at the rate would make 60 us.
  EXPECT_NEAR(m.CommSeconds(kAllReduce, kDirect, 40000, pair), 50e-6, 1e-12);
  // The bucket full: the first step leaves at the fitted speed (2 us), and
  // its 12 us refill 12 kB of the second's 20 kB.
  EXPECT_NEAR(m.CommSeconds(kAllReduce, kDirect, 40000, pair, CallRegime::kTogether, 1.0), 30e-6,
              1e-12);
  const ShapedCall full = ShapeCall(*link, 2, 10e-6, 10e9, 40000, 20000);
  EXPECT_NEAR(full.seconds, 30e-6, 1e-12);
  // It ends with 10 kB: the second step's 12 kB of credit, less its 20 kB,
  // plus its 18 us of refill.
  EXPECT_NEAR(full.credit_bytes, 10000, 1e-6);
  // What a call leaves, the next one starts with: as seconds of refill,
  // 10 us; two such calls back to back price alike.
  const double left =
      m.ShaperCreditAfter(kAllReduce, kDirect, 40000, pair, CallRegime::kTogether, 1.0, 0);
  EXPECT_NEAR(left, 10e-6, 1e-15);
  EXPECT_NEAR(m.CommSeconds(kAllReduce, kDirect, 40000, pair, CallRegime::kTogether, 0, true, left),
              m.CommSeconds(kAllReduce, kDirect, 40000, pair, CallRegime::kTogether, 10e-6), 1e-15);
  // The credit carried and the idle time's refill add up to the bucket.
  EXPECT_NEAR(
      m.CommSeconds(kAllReduce, kDirect, 40000, pair, CallRegime::kTogether, 5e-6, true, 1.0),
      30e-6, 1e-12);
  // An unshaped link carries no credit.
  link->clear_burst_bytes();
  EXPECT_EQ(CommModel(c).ShaperCreditAfter(kAllReduce, kDirect, 40000, pair, CallRegime::kTogether,
                                           1.0, 0),
            0);
  // One step: a send of 30 kB after the bucket filled pays 10 kB at the rate.
  EXPECT_NEAR(m.CommSeconds(kSend, kDirect, 30000, pair, CallRegime::kTogether, 1.0), 20e-6, 1e-12);
}

// A token-bucket shaper (tc tbf): after the link idled, what its bucket
// refilled leaves at once and the rest at the shaper's rate; back to back
// the whole call waits for the rate. The fitted bandwidth still bounds how
// fast the hosts move the bytes.
TEST(CommModel, ShapedLinkCreditsWhatItsBucketRefilledWhileIdle) {
  proto::Cluster c = TestCluster();
  proto::Link* link = c.mutable_inter_node();
  link->set_sustained_bandwidth(1e6);  // 1 MB/s
  link->set_burst_bytes(20000);
  ASSERT_TRUE(ValidateCluster(c).ok()) << ValidateCluster(c);
  CommModel m(c);
  const std::vector<int> pair = {3, 4};
  // A direct allreduce of 100 kB: 2 steps of a latency (10 us each) and
  // 50 kB on the wire. The second step's latency refills 10 B of credit:
  // one step's latency is hidden under the rate.
  const double latency = 10e-6;
  EXPECT_DOUBLE_EQ(m.CommSeconds(kAllReduce, kDirect, 100000, pair), latency + 0.1);
  // Idle 5 ms: 5 kB of credit; 1 s: the whole 20 kB bucket.
  EXPECT_DOUBLE_EQ(m.CommSeconds(kAllReduce, kDirect, 100000, pair, CallRegime::kTogether, 0.005),
                   latency + 0.095);
  EXPECT_DOUBLE_EQ(m.CommSeconds(kAllReduce, kDirect, 100000, pair, CallRegime::kTogether, 1.0),
                   latency + 0.08);
  EXPECT_DOUBLE_EQ(
      m.CommSeconds(kAllReduce, kDirect, 100000, pair, CallRegime::kTogether,
                    std::numeric_limits<double>::infinity()),
      latency + 0.08);
  // A call smaller than the credit pays its latency and its bytes at the
  // fitted speed (10 GB/s) only.
  EXPECT_DOUBLE_EQ(m.CommSeconds(kSend, kDirect, 1000, pair, CallRegime::kTogether, 1.0),
                   10e-6 + 1000 / 10e9);
  // Where the hosts are slower than the shaper (a regime of calls on
  // shared cores, say), their rate decides: at 0.5 MB/s the 100 kB take
  // 0.2 s, idle or not.
  link->set_bandwidth(0.5e6);
  link->clear_collective();
  CommModel slow_hosts(c);
  EXPECT_DOUBLE_EQ(
      slow_hosts.CommSeconds(kAllReduce, kDirect, 100000, pair, CallRegime::kTogether, 1.0),
      2 * latency + 0.2);
  link->set_bandwidth(10e9);
  // Unshaped links ignore the idle time.
  EXPECT_DOUBLE_EQ(m.CommSeconds(kSend, kDirect, 1000000, {0, 1}, CallRegime::kTogether, 1.0),
                   m.CommSeconds(kSend, kDirect, 1000000, {0, 1}));

  link->set_burst_bytes(-1);
  Status bad = ValidateCluster(c);
  EXPECT_EQ(bad.message(), "inter_node.burst_bytes must not be negative, got -1") << bad;
  link->set_burst_bytes(20000);
  link->clear_sustained_bandwidth();
  bad = ValidateCluster(c);
  EXPECT_NE(bad.message().find("inter_node.burst_bytes needs inter_node.sustained_bandwidth"),
            std::string::npos) << bad;
}

// Calls after their link idled longer cost more (Link.after_idle): the
// extra interpolated between the measured points, the first point's
// before it and the last's past it (a step's first call, whose link idled
// "forever", included), on top of the regime's costs and a shaper's.
TEST(CommModel, CallsAfterLongerIdleTakeTheMeasuredExtra) {
  proto::Cluster c = TestCluster();
  proto::Link* link = c.mutable_inter_node();
  auto point = [&](double idle, double extra) {
    proto::IdleCost* p = link->add_after_idle();
    p->set_idle_seconds(idle);
    p->set_extra_seconds(extra);
  };
  point(0.5e-3, 0);
  point(4e-3, 0.8e-3);
  point(12e-3, 1.2e-3);
  ASSERT_TRUE(ValidateCluster(c).ok()) << ValidateCluster(c);
  CommModel m(c);
  const std::vector<int> pair = {3, 4};
  const double busy = m.CommSeconds(kAllReduce, kDirect, 100000, pair);
  auto after = [&](double idle, CallRegime regime = CallRegime::kTogether) {
    return m.CommSeconds(kAllReduce, kDirect, 100000, pair, regime, idle) -
           m.CommSeconds(kAllReduce, kDirect, 100000, pair, regime, 0);
  };
  EXPECT_DOUBLE_EQ(after(0.2e-3), 0);
  EXPECT_DOUBLE_EQ(after(0.5e-3), 0);
  EXPECT_NEAR(after(2.25e-3), 0.4e-3, 1e-12);  // halfway to the second point
  EXPECT_NEAR(after(8e-3), 1.0e-3, 1e-12);
  EXPECT_NEAR(after(1.0), 1.2e-3, 1e-12);
  EXPECT_NEAR(after(std::numeric_limits<double>::infinity()), 1.2e-3, 1e-12);
  EXPECT_NEAR(after(8e-3, CallRegime::kAfterWait), 1.0e-3, 1e-12);
  // A busy link (the default) pays nothing extra; the intra-node link,
  // which measured none, never does.
  EXPECT_DOUBLE_EQ(busy, m.CommSeconds(kAllReduce, kDirect, 100000, pair,
                                       CallRegime::kTogether, 0));
  EXPECT_DOUBLE_EQ(m.CommSeconds(kSend, kDirect, 1000, {0, 1}, CallRegime::kTogether, 1.0),
                   m.CommSeconds(kSend, kDirect, 1000, {0, 1}));
  // On a shaper the extra adds to the bucket's credit.
  link->set_sustained_bandwidth(1e6);
  link->set_burst_bytes(20000);
  CommModel shaped(c);
  EXPECT_NEAR(shaped.CommSeconds(kAllReduce, kDirect, 100000, pair, CallRegime::kTogether, 1.0),
              10e-6 + 0.08 + 1.2e-3, 1e-12);

  // Points out of order, or extras out of range, name the point.
  link->mutable_after_idle(2)->set_idle_seconds(3e-3);
  EXPECT_EQ(ValidateCluster(c).message(),
            "inter_node.after_idle[2].idle_seconds must be above the point before's (0.004), "
            "got 0.003");
  link->mutable_after_idle(2)->set_idle_seconds(12e-3);
  link->mutable_after_idle(1)->set_extra_seconds(-1e-3);
  EXPECT_EQ(ValidateCluster(c).message(),
            "inter_node.after_idle[1].extra_seconds must be 0 to 1, got -0.001");
}

TEST(CommModel, OpTypesAsCollectives) {
  EXPECT_EQ(CollectiveCallOf("allreduce").value(), kAllReduce);
  EXPECT_EQ(CollectiveCallOf("reduce_scatter").value(), kReduceScatter);
  EXPECT_EQ(CollectiveCallOf("recv").value(), CommCall::kRecv);
  EXPECT_EQ(CollectiveCallOf("c_softmax_with_cross_entropy").value(), kAllReduce);
  EXPECT_EQ(CollectiveCallOf("matmul").status().message(),
            "op type 'matmul' does not communicate");
  EXPECT_EQ(ParseCommAlgorithm("tree").value(), kTree);
  EXPECT_FALSE(ParseCommAlgorithm("butterfly").ok());
}

TEST(CommModel, RealOpsPriceTheirCalls) {
  RegisterAllOps();
  Program p;
  Block& b = p.global_block();
  SetMeta(TensorMeta{proto::FP32, {256, 1024}}, b.AddVar("g"));
  SetMeta(TensorMeta{proto::FP32, {64, 100}}, b.AddVar("logits"));
  SetMeta(TensorMeta{proto::INT64, {64}}, b.AddVar("label"));
  b.FindVar("g")->set_is_data(true);
  Op* allreduce = AppendOpInferShapes(
      b, OpDescBuilder("allreduce").Input("X", "g").Output("Out", "g").Attr("ring_id", 0))
      .value();
  Op* xent = AppendOpInferShapes(
      b, OpDescBuilder("c_softmax_with_cross_entropy")
             .Input("Logits", "logits").Input("Label", "label")
             .Output("Softmax", "sm").Output("Loss", "loss")
             .Attr("ring_id", 0).Attr("nranks", 2).Attr("rank", 0))
      .value();
  CommModel m(TestCluster());
  // 1 MiB over the ring of one node.
  const double ar = m.OpCommSeconds("allreduce", WorkOf(*allreduce), kRing, kNode0).value();
  EXPECT_DOUBLE_EQ(ar, 6e-6 + 1.5 * 1048576 / 100e9);
  // Three allreduces of one float per row (64 rows: 256 bytes) across
  // nodes 0 and 1.
  const double x =
      m.OpCommSeconds("c_softmax_with_cross_entropy", WorkOf(*xent), kRing, {3, 4})
          .value();
  EXPECT_DOUBLE_EQ(x, 3 * (2 * 10e-6 + 256 / 10e9));
  EXPECT_FALSE(m.OpCommSeconds("gelu", OpWork{}, kRing, kNode0).ok());
}

// Direct all-reduce on 4 ranks of a node: a = 2 us, b = 1.5 / 100 GB/s, so
// 90% efficiency from 9 a / b = 9 * 2e-6 * 100e9 / 1.5 = 1.2 MB.
TEST(BucketSize, NinetyPercentOfTheLinkCappedAtAQuarterOfTheGradients) {
  CommModel m(TestCluster());
  auto big = ChooseBucketBytes(m, kAllReduce, kDirect, kNode0, int64_t{1} << 30);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_NEAR(big->efficient_bytes, 1.2e6, 1);
  EXPECT_EQ(big->bytes, big->efficient_bytes);
  // At that size the call does reach 90%: its byte term is 9x its latency.
  const double t = m.CommSeconds(kAllReduce, kDirect, big->bytes, kNode0);
  const double t0 = m.CommSeconds(kAllReduce, kDirect, 0, kNode0);
  EXPECT_NEAR((t - t0) / t, 0.9, 1e-6);
  EXPECT_NE(big->Explain().find("90% of its bandwidth from 1.1 MiB"), std::string::npos)
      << big->Explain();
  // Across nodes the latency is 10x and the bandwidth 1/10: the call costs
  // 10x at every size, and its 90% point is where it was.
  auto across = ChooseBucketBytes(m, kAllReduce, kDirect, kAcross, int64_t{1} << 40);
  ASSERT_TRUE(across.ok());
  EXPECT_NEAR(across->bytes, 1.2e6, 1);
  // Ten times the inter-node bandwidth alone: ten times the size.
  proto::Cluster fast = TestCluster();
  fast.mutable_inter_node()->set_bandwidth(100e9);
  auto fast_across =
      ChooseBucketBytes(CommModel(fast), kAllReduce, kDirect, kAcross, int64_t{1} << 40);
  ASSERT_TRUE(fast_across.ok());
  EXPECT_NEAR(fast_across->bytes, 1.2e7, 10);
  // Few gradients: a quarter of them, so the last bucket stays short.
  auto small = ChooseBucketBytes(m, kAllReduce, kDirect, kNode0, 400000);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->bytes, 100000);
  EXPECT_NE(small->Explain().find("capped at 1/4"), std::string::npos) << small->Explain();
  // Nonsense targets are refused.
  EXPECT_FALSE(ChooseBucketBytes(m, kAllReduce, kDirect, kNode0, 1, 1.0).ok());
  EXPECT_FALSE(ChooseBucketBytes(m, kAllReduce, kDirect, kNode0, -1).ok());
  EXPECT_FALSE(ChooseBucketBytes(m, kAllReduce, kDirect, kNode0, 1, 0.9, 0).ok());
}

TEST(CommFit, RecoversAlphaAndBeta) {
  const double alpha = 40e-6, beta = 2e9;
  std::vector<CommSample> samples;
  for (CommCall k : {kAllReduce, kAllGather, kSend}) {
    for (double bytes = 4096; bytes <= 16e6; bytes *= 4) {
      const CommTerms t = TermsOf(k, kDirect, 2);
      samples.push_back({CommCallName(k), t, bytes,
                         alpha * t.latency_steps + t.byte_factor * bytes / beta});
    }
  }
  CommFit fit = FitAlphaBeta(samples).value();
  EXPECT_NEAR(fit.latency_seconds, alpha, 1e-12);
  EXPECT_NEAR(fit.bandwidth, beta, 1e-3);
  EXPECT_LT(fit.rms_relative_residual, 1e-9);
  EXPECT_FALSE(fit.latency_clamped);
}

TEST(CommFit, RecoversAHalfDuplexLink) {
  const double alpha = 60e-6, beta = 2e9;
  std::vector<CommSample> samples;
  for (CommCall k : {kAllReduce, kAllGather, kSend}) {
    for (double bytes = 4096; bytes <= 16e6; bytes *= 4) {
      const CommTerms t = TermsOf(k, kDirect, 2);
      samples.push_back({CommCallName(k), t, bytes,
                         alpha * t.latency_steps + LinkByteFactor(t, true) * bytes / beta});
    }
  }
  CommFit half = FitAlphaBeta(samples, true).value();
  EXPECT_NEAR(half.latency_seconds, alpha, 1e-12);
  EXPECT_NEAR(half.bandwidth, beta, 1e-3);
  // The full-duplex model cannot fit the same times as well.
  EXPECT_GT(FitAlphaBeta(samples, false).value().rms_relative_residual, 0.1);
}

// Calls whose times do not grow with their bytes (a shaped link's calls
// that its bucket covers): no β without a fallback; with one, β is pinned
// to it and α fitted alone.
TEST(CommFit, FlatTimesPinTheBandwidthWhereAskedTo) {
  std::vector<CommSample> samples;
  for (double bytes : {4096.0, 16384.0}) {
    for (CommCall k : {kAllReduce, kSend}) {
      const CommTerms t = TermsOf(k, kDirect, 2);
      // 100 us a step, the bigger calls 1% faster.
      samples.push_back(
          {CommCallName(k), t, bytes, 100e-6 * t.latency_steps * (bytes > 5000 ? 0.99 : 1.0)});
    }
  }
  EXPECT_EQ(FitAlphaBeta(samples).status().message(),
            "β is undetermined: the times do not grow with the bytes moved");
  CommFit fit = FitAlphaBeta(samples, false, 1e15).value();
  EXPECT_TRUE(fit.bandwidth_pinned);
  EXPECT_DOUBLE_EQ(fit.bandwidth, 1e15);
  EXPECT_NEAR(fit.latency_seconds, 99.5e-6, 0.1e-6);
  EXPECT_LT(fit.rms_relative_residual, 0.01);
  // Times that do grow are fitted as ever.
  samples[2].seconds = samples[3].seconds = 1;
  EXPECT_FALSE(FitAlphaBeta(samples, false, 1e15).value().bandwidth_pinned);
}

TEST(CommFit, NegativeLatencyIsPinnedToZero) {
  // Times that shrink less than proportionally toward zero bytes would need
  // α < 0 to fit.
  std::vector<CommSample> samples = {
      {"a", {1, 1}, 1000, 0.5e-6},
      {"b", {1, 1}, 1e6, 1.1e-3},
  };
  CommFit fit = FitAlphaBeta(samples).value();
  EXPECT_TRUE(fit.latency_clamped);
  EXPECT_EQ(fit.latency_seconds, 0);
  EXPECT_GT(fit.bandwidth, 0);
  EXPECT_EQ(FitAlphaBeta({samples[0]}).status().message(),
            "fitting α and β needs at least 2 samples, got 1");
}

TEST(CoreWaitFit, ExpectedWaitIsHalfTheBurstUpToTheSlice) {
  EXPECT_DOUBLE_EQ(ExpectedCoreWait(1e-3, 2e-3), 0.5e-3);
  // Half the calls find more than the slice left: E = S - S^2 / (2L).
  EXPECT_DOUBLE_EQ(ExpectedCoreWait(4e-3, 2e-3), 2e-3 - 4e-6 / 8e-3);
  EXPECT_DOUBLE_EQ(ExpectedCoreWait(std::numeric_limits<double>::infinity(), 2e-3), 2e-3);
}

// Over two cores the call waits for the longer: E[max of two U(0, L)] is
// 2L/3; past the slice, E = S - S^3 / (3 L^2).
TEST(CoreWaitFit, OverTwoCoresTheLongerBurstCounts) {
  EXPECT_DOUBLE_EQ(ExpectedCoreWait(1e-3, 2e-3, 2), 2e-3 / 3);
  EXPECT_NEAR(ExpectedCoreWait(4e-3, 2e-3, 2), 2e-3 - 8e-9 / 48e-6, 1e-15);
  EXPECT_GT(ExpectedCoreWait(1e-3, 2e-3, 2), ExpectedCoreWait(1e-3, 2e-3, 1));
  // Recovered from calls whose parties sit on two cores.
  const double c = 0.2e-3, waits = 1.5, slice = 1.2e-3;
  std::vector<CoreWaitSample> samples;
  for (double burst : {1e-4, 3e-4, 1e-3, 3e-3, std::numeric_limits<double>::infinity()}) {
    samples.push_back({burst, c + waits * ExpectedCoreWait(burst, slice, 2)});
  }
  CoreWaitFit fit = FitCoreWait(samples, 2).value();
  EXPECT_NEAR(fit.slice_seconds, slice, 0.05 * slice);
  EXPECT_NEAR(fit.waits, waits, 0.1 * waits);
}

TEST(CoreWaitFit, RecoversWaitsSliceAndTheBusyCall) {
  const double c = 0.2e-3, waits = 3, slice = 0.8e-3;
  std::vector<CoreWaitSample> samples;
  for (double burst : {1e-4, 3e-4, 1e-3, 3e-3, std::numeric_limits<double>::infinity()}) {
    samples.push_back({burst, c + waits * ExpectedCoreWait(burst, slice)});
  }
  CoreWaitFit fit = FitCoreWait(samples).value();
  // The slice grid is 4.7% apart: the fit lands within a step of it.
  EXPECT_NEAR(fit.slice_seconds, slice, 0.05 * slice);
  EXPECT_NEAR(fit.waits, waits, 0.1 * waits);
  EXPECT_NEAR(fit.busy_call_seconds, c, 0.1 * c);
  EXPECT_LT(fit.rms_relative_residual, 0.02);
  ASSERT_EQ(fit.predicted.size(), samples.size());
}

TEST(CoreWaitFit, SaysWhatTheSamplesLack) {
  EXPECT_EQ(FitCoreWait({{1e-4, 1e-3}, {3e-3, 2e-3}}).status().message(),
            "core-wait fit: needs calls beside 3 burst lengths or more, got 2");
  EXPECT_EQ(FitCoreWait({{1e-4, 1e-3}, {2e-4, 2e-3}, {3e-4, 2e-3}}).status().message(),
            "core-wait fit: needs a burst of 1 ms or more (or unbounded) to find the slice");
  EXPECT_EQ(FitCoreWait({{1e-4, 0}, {2e-4, 2e-3}, {3e-3, 2e-3}}).status().message(),
            "core-wait fit: a sample needs a positive burst and call time, got 0.0001 s and 0 s");
}

}  // namespace
}  // namespace loom
