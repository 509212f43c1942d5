// What the simulator's tests share: a timer of fixed costs, and gpt-tiny
// planned and lowered under a strategy.
#ifndef LOOM_UNITTESTS_SIMULATOR_TEST_UTIL_H_
#define LOOM_UNITTESTS_SIMULATOR_TEST_UTIL_H_

#include "models/gpt.h"
#include "passes/planner.h"
#include "scheduler/simulator.h"

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

// gpt-tiny of `layers` layers at batch `batch`, planned for every rank of
// `strategy` and lowered.
inline ExecutionGraph Lower(const proto::Strategy& strategy, int layers = 8, int batch = 16) {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = layers;
  c.batch_size = batch;
  TrainingProgram tp = BuildGptTrainingProgram(c).value();
  Plan plan = PlanRanks(tp.main, tp.startup, strategy, {}).value();
  return LowerPlan(plan).value();
}

// The simulated step time of `graph` under `timer`.
inline double StepTime(const ExecutionGraph& graph, const InstructionTimer& timer) {
  SimulationOptions o;
  o.timer = &timer;
  return Simulate(graph, o).value().step_time_s;
}

}  // namespace loom

#endif  // LOOM_UNITTESTS_SIMULATOR_TEST_UTIL_H_
