// Simulating a GPT training step under a strategy: plan for timing (one
// rank per pipeline stage, shared by its tensor- and data-parallel peers),
// lower once per stage, and run the simulator over every rank. Shared by
// `loom simulate`, `loom demo`, the tests and the benchmarks.
#ifndef LOOM_RUNTIME_SIMULATION_H_
#define LOOM_RUNTIME_SIMULATION_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/gpt.h"
#include "passes/planner.h"
#include "runtime/gpt_plan.h"
#include "scheduler/simulator.h"

namespace loom {

struct GptSimulation {
  Plan plan;
  ExecutionGraph graph;
  std::unique_ptr<InstructionTimer> timer;
  SimulationResult result;
  double plan_seconds = 0;   // wall time of each phase
  double lower_seconds = 0;
  double simulate_seconds = 0;
};

// Makes the timer once the graph exists (a cost model prices its ops).
using TimerFactory =
    std::function<StatusOr<std::unique_ptr<InstructionTimer>>(const ExecutionGraph&)>;

// Timers that price each graph at `costs` (runtime/cost_model_timer.h),
// which must outlive the factory: the context the plan was made with
// (PlanOptions::costs), so that it is chosen and timed at one set of prices.
TimerFactory CostModelTimers(const CostContext& costs);

// Plans one step of `config` under `strategy` for timing (one rank per
// stage: PlanOptions::share_tensor_parallel_ranks), lowers and simulates it.
StatusOr<GptSimulation> SimulateGpt(const GptConfig& config, const OptimizerConfig& optimizer,
                                    const proto::Strategy& strategy, const TimerFactory& timer,
                                    const SimulationOptions& options = {},
                                    PlanOptions plan_options = {});

// SimulateGpt from programs built once for many strategies.
StatusOr<GptSimulation> SimulateGpt(const GptPrograms& programs, const proto::Strategy& strategy,
                                    const TimerFactory& timer,
                                    const SimulationOptions& options = {},
                                    PlanOptions plan_options = {});

// SimulateGpt under a hard cap on every rank's simulated peak memory. When
// the strategy's plan peaks above `limit_bytes` and its schedule takes
// pipeline.max_in_flight (1F1B-overlap), less overlap is tried: the most
// micro-batches in flight that fit, and the schedule with no jobs
// interleaved (ScheduleInfo::without_overlap); the faster that fits is
// chosen. Under ZeRO stage 3 (with sharding.keep_gathered_bytes 0) a plan
// that fits keeps as many buckets whole for the step as still fit.
// `*explain` says what was chosen and why, and `*chosen` (if given) is the
// strategy that fits, to plan a run with. An error names the rank and its
// peak when nothing fits. The model is built once for all the plans tried.
StatusOr<GptSimulation> SimulateGptWithinMemory(const GptConfig& config,
                                                const OptimizerConfig& optimizer,
                                                proto::Strategy strategy,
                                                const TimerFactory& timer, int64_t limit_bytes,
                                                std::string* explain,
                                                proto::Strategy* chosen = nullptr,
                                                const SimulationOptions& options = {},
                                                PlanOptions plan_options = {});

// Lowers and simulates a given plan (a saved one, or one that will run).
StatusOr<GptSimulation> SimulatePlan(Plan plan, const TimerFactory& timer,
                                     const SimulationOptions& options = {});

}  // namespace loom

#endif  // LOOM_RUNTIME_SIMULATION_H_
