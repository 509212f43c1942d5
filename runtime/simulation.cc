#include "runtime/simulation.h"

#include <chrono>

#include "runtime/gpt_plan.h"

namespace loom {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

StatusOr<GptSimulation> SimulatePlan(Plan plan, const TimerFactory& timer,
                                     const SimulationOptions& options) {
  GptSimulation sim;
  sim.plan = std::move(plan);
  auto start = std::chrono::steady_clock::now();
  LOOM_ASSIGN_OR_RETURN(sim.graph, LowerPlan(sim.plan));
  sim.lower_seconds = SecondsSince(start);
  start = std::chrono::steady_clock::now();
  LOOM_ASSIGN_OR_RETURN(sim.timer, timer(sim.graph));
  SimulationOptions o = options;
  o.timer = sim.timer.get();
  LOOM_ASSIGN_OR_RETURN(sim.result, Simulate(sim.graph, o));
  sim.simulate_seconds = SecondsSince(start);
  return sim;
}

StatusOr<GptSimulation> SimulateGpt(const GptConfig& config, const OptimizerConfig& optimizer,
                                    const proto::Strategy& strategy, const TimerFactory& timer,
                                    const SimulationOptions& options, PlanOptions plan_options) {
  plan_options.share_tensor_parallel_ranks = true;
  const auto start = std::chrono::steady_clock::now();
  LOOM_ASSIGN_OR_RETURN(Plan plan, PlanGpt(config, optimizer, strategy, {}, plan_options));
  const double plan_seconds = SecondsSince(start);
  LOOM_ASSIGN_OR_RETURN(GptSimulation sim, SimulatePlan(std::move(plan), timer, options));
  sim.plan_seconds = plan_seconds;
  return sim;
}

}  // namespace loom
