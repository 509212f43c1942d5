// Simulating a GPT training step under a strategy: plan for timing (one
// rank per pipeline stage, shared by its tensor- and data-parallel peers),
// lower once per stage, and run the simulator over every rank. Shared by
// `loom simulate`, `loom demo`, the tests and the benchmarks.
#ifndef LOOM_RUNTIME_SIMULATION_H_
#define LOOM_RUNTIME_SIMULATION_H_

#include <string>
#include <vector>

#include "models/gpt.h"
#include "passes/planner.h"
#include "scheduler/simulator.h"

namespace loom {

struct GptSimulation {
  Plan plan;  // for timing only (PlanOptions::share_tensor_parallel_ranks)
  ExecutionGraph graph;
  SimulationResult result;
  double plan_seconds = 0;   // wall time of each phase
  double lower_seconds = 0;
  double simulate_seconds = 0;
};

// Plans, lowers and simulates one step of `config` under `strategy`, with
// instruction times from `timer`.
StatusOr<GptSimulation> SimulateGpt(const GptConfig& config, const OptimizerConfig& optimizer,
                                    const proto::Strategy& strategy,
                                    const InstructionTimer& timer,
                                    const SimulationOptions& options = {},
                                    PlanOptions plan_options = {});

}  // namespace loom

#endif  // LOOM_RUNTIME_SIMULATION_H_
