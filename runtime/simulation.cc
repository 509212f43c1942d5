#include "runtime/simulation.h"

#include <chrono>

#include "runtime/gpt_plan.h"

namespace loom {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

StatusOr<GptSimulation> SimulateGpt(const GptConfig& config, const OptimizerConfig& optimizer,
                                    const proto::Strategy& strategy,
                                    const InstructionTimer& timer,
                                    const SimulationOptions& options, PlanOptions plan_options) {
  GptSimulation sim;
  plan_options.share_tensor_parallel_ranks = true;
  auto start = std::chrono::steady_clock::now();
  LOOM_ASSIGN_OR_RETURN(sim.plan, PlanGpt(config, optimizer, strategy, {}, plan_options));
  sim.plan_seconds = SecondsSince(start);
  start = std::chrono::steady_clock::now();
  LOOM_ASSIGN_OR_RETURN(sim.graph, LowerPlan(sim.plan));
  sim.lower_seconds = SecondsSince(start);
  start = std::chrono::steady_clock::now();
  SimulationOptions o = options;
  o.timer = &timer;
  LOOM_ASSIGN_OR_RETURN(sim.result, Simulate(sim.graph, o));
  sim.simulate_seconds = SecondsSince(start);
  return sim;
}

}  // namespace loom
