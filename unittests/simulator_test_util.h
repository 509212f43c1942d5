// What the simulator's tests share: a timer of fixed costs, gpt-tiny
// planned and lowered under a strategy, and a simulation's calls.
#ifndef LOOM_UNITTESTS_SIMULATOR_TEST_UTIL_H_
#define LOOM_UNITTESTS_SIMULATOR_TEST_UTIL_H_

#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

#include "models/gpt.h"
#include "passes/planner.h"
#include "scheduler/simulator.h"
#include "unittests/test_plan_options.h"

namespace loom {

// Compute costs `compute` each, communication `comm` each.
class FixedTimer : public InstructionTimer {
 public:
  FixedTimer(double compute, double comm) : compute_(compute), comm_(comm) {}
  double Seconds(const RankGraph&, const Instruction& ins) const override {
    return ins.communicates() ? comm_ : compute_;
  }

 private:
  double compute_, comm_;
};

// FixedTimer on ranks that share cores: subclasses say which (CorePool)
// and how they slow each other.
class FixedSharedCoreTimer : public FixedTimer, public SharedCoreModel {
 public:
  using FixedTimer::FixedTimer;
  const SharedCoreModel* shared_cores() const override { return this; }
};

// gpt-tiny of `layers` layers at batch `batch`, planned for every rank of
// `strategy` and lowered.
inline ExecutionGraph Lower(const proto::Strategy& strategy, int layers = 8, int batch = 16) {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = layers;
  c.batch_size = batch;
  TrainingProgram tp = BuildGptTrainingProgram(c).value();
  Plan plan = PlanRanks(tp.main, tp.startup, strategy, {}, LocalPlanOptions()).value();
  return LowerPlan(plan).value();
}

// The simulated step time of `graph` under `timer`.
inline double StepTime(const ExecutionGraph& graph, const InstructionTimer& timer) {
  SimulationOptions o;
  o.timer = &timer;
  return Simulate(graph, o).value().step_time_s;
}

// The calls (collectives and transfers) of `graph`'s trace under `timer`.
inline std::vector<TraceEvent> CallsOf(const ExecutionGraph& graph,
                                       const InstructionTimer& timer) {
  SimulationOptions o;
  o.timer = &timer;
  o.trace = true;
  auto result = Simulate(graph, o);
  EXPECT_TRUE(result.ok()) << result.status();
  std::vector<TraceEvent> calls;
  for (const TraceEvent& e : result.ok() ? result->trace : std::vector<TraceEvent>()) {
    if (e.kind != InstructionKind::kCompute && e.kind != InstructionKind::kNoOp) {
      calls.push_back(e);
    }
  }
  return calls;
}

// The global ranks of the call `e` of `graph`'s trace, ascending.
inline std::vector<int> PartiesOf(const ExecutionGraph& graph, const TraceEvent& e) {
  const RankGraph& rank = graph.ranks[e.rank];
  const Instruction& ins = rank.instructions()[e.instruction];
  std::vector<int> parties = ins.kind == InstructionKind::kSend ||
                                     ins.kind == InstructionKind::kRecv
                                 ? std::vector<int>{e.rank, rank.Peer(ins)}
                                 : rank.Group(ins);
  std::sort(parties.begin(), parties.end());
  return parties;
}

}  // namespace loom

#endif  // LOOM_UNITTESTS_SIMULATOR_TEST_UTIL_H_
