// The simulator's trace: the same on every run, read back from its Chrome
// JSON to the same metrics, and compared with a measured one (by op type,
// and with measured calls started at their rendezvous).
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "scheduler/simulator.h"
#include "scheduler/timeline_metrics.h"
#include "scheduler/trace.h"
#include "scheduler/trace_compare.h"
#include "unittests/simulator_test_util.h"

namespace loom {
namespace {

TEST(Simulator, TwoRunsGiveTheSameTrace) {
  ExecutionGraph graph = Lower(MakeStrategy(2, 2, 2, 4, "VPP", 2), 4);
  FixedTimer timer(1e-4, 3e-4);
  SimulationOptions o;
  o.timer = &timer;
  o.trace = true;
  auto a = Simulate(graph, o);
  auto b = Simulate(graph, o);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->trace.size(), b->trace.size());
  for (size_t i = 0; i < a->trace.size(); ++i) {
    EXPECT_EQ(a->trace[i].rank, b->trace[i].rank);
    EXPECT_EQ(a->trace[i].op, b->trace[i].op);
    EXPECT_EQ(a->trace[i].start_ns, b->trace[i].start_ns);
    EXPECT_EQ(a->trace[i].end_ns, b->trace[i].end_ns);
  }
  EXPECT_EQ(a->step_time_s, b->step_time_s);
}

// One definition of the metrics: the simulator's, accumulated as it runs,
// equal those computed from its trace, also after a Chrome JSON round trip.
TEST(Simulator, TraceAnalysisAgreesWithTheSimulator) {
  ExecutionGraph graph = Lower(MakeStrategy(1, 2, 2, 4, "1F1B"), 4);
  FixedTimer timer(2e-4, 3e-4);
  SimulationOptions o;
  o.timer = &timer;
  o.trace = true;
  auto sim = Simulate(graph, o);
  ASSERT_TRUE(sim.ok()) << sim.status();
  auto parsed = ParseChromeTrace(ChromeTraceJson(sim->trace));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), sim->trace.size());
  for (size_t i = 0; i < parsed->size(); ++i) {
    const TraceEvent& a = sim->trace[i];
    const TraceEvent& b = (*parsed)[i];
    ASSERT_TRUE(a.rank == b.rank && a.stream == b.stream && a.op == b.op && a.job == b.job &&
                a.kind == b.kind && a.comm == b.comm && a.instruction == b.instruction &&
                a.start_ns == b.start_ns && a.end_ns == b.end_ns)
        << "event " << i;
  }
  TimelineMetrics m = AnalyzeTrace(*parsed);
  EXPECT_NEAR(m.step_time_s, sim->step_time_s, 1e-8);
  EXPECT_NEAR(m.bubble_fraction, sim->bubble_fraction, 1e-6);
  double exposed_mp = 0;
  for (int c = 0; c < kNumCommCategories; ++c) {
    EXPECT_NEAR(m.exposed_comm_s[c], sim->exposed_comm_s[c], 1e-8) << c;
  }
  exposed_mp = sim->exposed_comm_s[static_cast<int>(CommCategory::kMp)];
  EXPECT_GT(exposed_mp, 0);
  ASSERT_EQ(m.ranks.size(), sim->ranks.size());
  for (size_t r = 0; r < m.ranks.size(); ++r) {
    EXPECT_NEAR(m.ranks[r].calc_compute_s, sim->ranks[r].calc_compute_s, 1e-8);
  }
}

// The comparison points at the op type that the two timelines price
// differently, by exactly the time it adds.
TEST(Simulator, CompareTracesFindsTheOpThatDiffers) {
  class SlowMatmuls : public FixedTimer {
   public:
    SlowMatmuls() : FixedTimer(1e-4, 2e-4) {}
    double Seconds(const RankGraph& g, const Instruction& ins) const override {
      return FixedTimer::Seconds(g, ins) * (ins.op_type == "matmul_grad" ? 3 : 1);
    }
  };
  ExecutionGraph graph = Lower(MakeStrategy(1, 2, 2, 4, "1F1B"), 4);
  FixedTimer base(1e-4, 2e-4);
  SlowMatmuls slow;
  SimulationOptions o;
  o.trace = true;
  o.timer = &base;
  auto simulated = Simulate(graph, o);
  o.timer = &slow;
  auto measured = Simulate(graph, o);
  ASSERT_TRUE(simulated.ok() && measured.ok());
  TraceComparison c = CompareTraces(measured->trace, simulated->trace);
  ASSERT_FALSE(c.by_op.empty());
  EXPECT_EQ(c.by_op[0].key, "matmul_grad");
  EXPECT_EQ(c.by_op[0].measured_count, c.by_op[0].simulated_count);
  // Trace times are whole nanoseconds: at most 1 ns off per event.
  EXPECT_NEAR(c.by_op[0].difference_s(), -2e-4 * c.by_op[0].measured_count, 1e-6);
  EXPECT_NEAR(c.by_op[1].difference_s(), 0, 1e-6);
  EXPECT_EQ(c.by_stream[0].key, "calc");
  EXPECT_GT(c.measured_step_s, c.simulated_step_s);
  EXPECT_NE(TraceComparisonToString(c).find("matmul_grad"), std::string::npos);
  // Each side's bubble and exposed communication, as its simulation
  // accounted them.
  EXPECT_NEAR(c.measured_bubble, measured->bubble_fraction, 1e-6);  // ns rounding
  EXPECT_NEAR(c.simulated_bubble, simulated->bubble_fraction, 1e-6);
  for (int k = 0; k < kNumCommCategories; ++k) {
    EXPECT_NEAR(c.measured_exposed_s[k], measured->exposed_comm_s[k], 1e-8) << k;
    EXPECT_NEAR(c.simulated_exposed_s[k], simulated->exposed_comm_s[k], 1e-8) << k;
  }
  EXPECT_GT(c.measured_exposed_s[0] + c.simulated_exposed_s[0], 0);
  EXPECT_NE(TraceComparisonToString(c).find("exposed comm (ms, mean over ranks): mp measured"),
            std::string::npos);
}

// A measured communication starts when its stream reaches it and waits
// there for its parties; aligned, it starts at the last arrival, as the
// simulator's does, and the wait is reported apart.
TEST(Simulator, MeasuredCommunicationIsComparedFromItsRendezvous) {
  ExecutionGraph graph = Lower(MakeStrategy(1, 2, 2, 4, "1F1B"), 4);
  FixedTimer timer(1e-4, 2e-4);
  SimulationOptions o;
  o.trace = true;
  o.timer = &timer;
  auto sim = Simulate(graph, o);
  ASSERT_TRUE(sim.ok()) << sim.status();
  // Every rank reaches each of its calls earlier than the rendezvous, rank
  // r by (r + 1) us: the latest party, the lowest rank, comes 1 us early.
  std::vector<TraceEvent> measured = sim->trace;
  int64_t calls = 0;
  for (TraceEvent& e : measured) {
    if (e.comm == CommCategory::kNone) continue;
    e.start_ns -= 1000 * (e.rank + 1);
    ++calls;
  }
  ASSERT_GT(calls, 0);
  std::vector<int64_t> waits;
  auto aligned = StartAtRendezvous(measured, graph, &waits);
  ASSERT_TRUE(aligned.ok()) << aligned.status();
  for (size_t i = 0; i < measured.size(); ++i) {
    const TraceEvent& e = sim->trace[i];
    if (e.comm == CommCategory::kNone) {
      EXPECT_EQ((*aligned)[i].start_ns, e.start_ns);
      EXPECT_EQ(waits[i], 0);
      continue;
    }
    const RankGraph& g = graph.ranks[e.rank];
    const Instruction& ins = g.instructions()[e.instruction];
    const int first = ins.kind == InstructionKind::kCollective
                          ? g.Group(ins).front()
                          : std::min(e.rank, g.Peer(ins));
    EXPECT_EQ((*aligned)[i].start_ns, e.start_ns - 1000 * (first + 1)) << e.op;
    EXPECT_EQ(waits[i], 1000 * (e.rank - first)) << e.op;
  }
  auto c = CompareTraces(measured, sim->trace, graph);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->aligned);
  for (const TraceDifference& d : c->by_op) {
    if (d.key == "matmul") {
      EXPECT_NEAR(d.difference_s(), 0, 1e-9);
      EXPECT_EQ(d.measured_wait_s, 0);
    }
    if (d.key == "send") {
      EXPECT_GT(d.measured_wait_s, 0);
    }
  }
  ASSERT_FALSE(c->by_instruction.empty());
  EXPECT_NE(TraceComparisonToString(*c).find("wait ms"), std::string::npos);

  measured[0].instruction = 100000;
  measured[0].kind = InstructionKind::kCollective;
  auto bad = StartAtRendezvous(measured, graph);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("trace event 0 (rank "), std::string::npos)
      << bad.status();
}

}  // namespace
}  // namespace loom
