#include "runtime/simulation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>

#include "passes/amp.h"
#include "passes/strategy.h"
#include "runtime/cost_model_timer.h"
#include "scheduler/memory_fit.h"
#include "scheduler/schedule.h"

namespace loom {

TimerFactory CostModelTimers(const CostContext& costs) {
  return [&costs](const ExecutionGraph& graph) -> StatusOr<std::unique_ptr<InstructionTimer>> {
    LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CostModelTimer> t, CostModelTimer::Create(graph, costs));
    return std::unique_ptr<InstructionTimer>(std::move(t));
  };
}

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

StatusOr<GptSimulation> SimulateGpt(const GptPrograms& programs, const proto::Strategy& strategy,
                                    const TimerFactory& timer, const SimulationOptions& options,
                                    PlanOptions plan_options) {
  plan_options.share_tensor_parallel_ranks = true;
  const auto start = std::chrono::steady_clock::now();
  LOOM_ASSIGN_OR_RETURN(Plan plan, programs.PlanOf(strategy, {}, plan_options));
  const double plan_seconds = SecondsSince(start);
  LOOM_ASSIGN_OR_RETURN(GptSimulation sim, SimulatePlan(std::move(plan), timer, options));
  sim.plan_seconds = plan_seconds;
  return sim;
}

StatusOr<GptSimulation> SimulateGpt(const GptConfig& config, const OptimizerConfig& optimizer,
                                    const proto::Strategy& strategy, const TimerFactory& timer,
                                    const SimulationOptions& options, PlanOptions plan_options) {
  const auto start = std::chrono::steady_clock::now();
  LOOM_ASSIGN_OR_RETURN(const AmpConfig amp, AmpConfigOf(strategy));
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<GptPrograms> programs,
                        GptPrograms::Build(config, optimizer, amp));
  const double build_seconds = SecondsSince(start);
  LOOM_ASSIGN_OR_RETURN(GptSimulation sim,
                        SimulateGpt(*programs, strategy, timer, options, std::move(plan_options)));
  sim.plan_seconds += build_seconds;  // planning starts from the model
  return sim;
}

namespace {

std::string Megabytes(int64_t bytes) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), bytes < 100000000 ? "%.2f MB" : "%.0f MB", bytes / 1e6);
  return buf;
}

std::string Describe(const GptSimulation& s) {
  const RankMetrics& peak = s.result.PeakRank();
  return StrCat("peak ", Megabytes(peak.peak_bytes()), " on rank ", peak.rank, ", step ",
                StrCat(std::round(s.result.step_time_s * 1e5) / 100), " ms");
}

// ZeRO-3 that fits `limit_bytes` gathering every bucket before each use
// (`fitting`): keeps as many buckets whole for the step as still fit,
// which saves their gathers in every micro-batch but gathers them after
// the update, where nothing hides it. All if they fit, else the most found
// by halving the bytes kept, five times; then the faster of that and
// `fitting`.
StatusOr<GptSimulation> KeepGatheredWithin(const GptPrograms& programs,
                                           proto::Strategy* strategy, const TimerFactory& timer,
                                           int64_t limit_bytes, GptSimulation fitting,
                                           std::string* explain, const SimulationOptions& options,
                                           const PlanOptions& plan_options) {
  const std::string head = StrCat("memory limit ", Megabytes(limit_bytes), ": stage 3 ");
  proto::Strategy trial = *strategy;
  trial.mutable_sharding()->set_keep_gathered_bytes(-1);
  LOOM_ASSIGN_OR_RETURN(GptSimulation all,
                        SimulateGpt(programs, trial, timer, options, plan_options));
  if (all.result.PeakRank().peak_bytes() <= limit_bytes) {
    // Kept whole, every bucket is gathered once after the update, where
    // nothing may be left to hide it under: it is taken only if faster.
    if (all.result.step_time_s >= fitting.result.step_time_s) {
      *explain = StrCat(head, "gathers every bucket before each use (", Describe(fitting),
                        "): keeping every bucket whole for the step fits but is no faster (",
                        Describe(all), ")");
      return fitting;
    }
    *explain = StrCat(head, "keeps every bucket whole for the step (", Describe(all),
                      "; gathering each before every use: ", Describe(fitting), ")");
    *strategy = trial;
    return all;
  }
  // The buckets' bytes: the rank holds 1/N of them, N the ranks sharing.
  const ParallelLayout layout = LayoutOf(*strategy);
  int64_t lo = 0;
  // (Under AMP the master weights are the sharded parameters.)
  const PersistentBytes& held = fitting.result.PeakRank().persistent;
  int64_t hi = (held.parameters + held.master_weights) *
               std::max(1, layout.sharding > 0 ? layout.sharding : layout.dp);
  std::optional<GptSimulation> best;
  for (int round = 0; round < 5; ++round) {
    const int64_t mid = lo + (hi - lo) / 2;
    trial.mutable_sharding()->set_keep_gathered_bytes(mid);
    LOOM_ASSIGN_OR_RETURN(GptSimulation sim,
                          SimulateGpt(programs, trial, timer, options, plan_options));
    if (sim.result.PeakRank().peak_bytes() <= limit_bytes) {
      lo = mid;
      best = std::move(sim);
    } else {
      hi = mid;
    }
  }
  if (!best || lo == 0) {
    *explain = StrCat(head, "gathers every bucket before each use (", Describe(fitting),
                      "); keeping any whole for the step does not fit");
    return fitting;
  }
  if (best->result.step_time_s >= fitting.result.step_time_s) {
    *explain = StrCat(head, "gathers every bucket before each use (", Describe(fitting),
                      "): keeping the ", Megabytes(lo), " that fit whole for the step is no "
                      "faster (", Describe(*best), ")");
    return fitting;
  }
  strategy->mutable_sharding()->set_keep_gathered_bytes(lo);
  *explain = StrCat(head, "keeps up to ", Megabytes(lo), " of buckets whole for the step (",
                    Describe(*best), ") and gathers the rest before each use (all kept: ",
                    Describe(all), ")");
  return std::move(*best);
}

// The least recomputation under which `*strategy` (recomputing nothing)
// fits `limit_bytes`: every layer's attention core (selective), else the
// first k layers of each chunk in full, k the fewest that fit. Moves
// `*strategy` to what it found; without a fit, to full recomputation of
// every layer, for the levers after it to start from, and returns nullopt.
StatusOr<std::optional<GptSimulation>> LeastRecomputeWithin(
    const GptPrograms& programs, proto::Strategy* strategy, const TimerFactory& timer,
    int64_t limit_bytes, const GptSimulation& none,
    std::string* explain, const SimulationOptions& options, const PlanOptions& plan_options) {
  const std::string head = StrCat("memory limit ", Megabytes(limit_bytes),
                                  ": without recomputation ", Describe(none));
  auto fits = [&](const GptSimulation& s) {
    return s.result.PeakRank().peak_bytes() <= limit_bytes;
  };
  auto simulate = [&](const std::string& granularity, int layers) {
    proto::Strategy trial = *strategy;
    trial.mutable_recompute()->set_granularity(granularity);
    trial.mutable_recompute()->set_num_layers(layers);
    return SimulateGpt(programs, trial, timer, options, plan_options);
  };
  LOOM_ASSIGN_OR_RETURN(GptSimulation selective, simulate("selective", 0));
  if (fits(selective)) {
    strategy->mutable_recompute()->set_granularity("selective");
    *explain = StrCat(head, "; recomputing every layer's attention core (selective) fits (",
                      Describe(selective), ")");
    return std::optional<GptSimulation>(std::move(selective));
  }
  // Layers a chunk holds: the most `num_layers` can ask for.
  const int chunks = std::max(1, strategy->pipeline().degree()) *
                     std::max(1, strategy->pipeline().vpp_degree());
  const int per_chunk = static_cast<int>((programs.config().num_layers + chunks - 1) / chunks);
  LOOM_ASSIGN_OR_RETURN(GptSimulation all, simulate("full", 0));
  strategy->mutable_recompute()->set_granularity("full");
  if (!fits(all)) {
    *explain = StrCat(head, "; selective ", Describe(selective), "; full ", Describe(all));
    return std::optional<GptSimulation>();
  }
  // The fewest layers in full that fit: the peak falls as layers are added.
  int lo = 0, hi = per_chunk;  // lo does not fit, hi does
  std::optional<GptSimulation> best;
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    LOOM_ASSIGN_OR_RETURN(GptSimulation sim, simulate("full", mid));
    if (fits(sim)) {
      hi = mid;
      best = std::move(sim);
    } else {
      lo = mid;
    }
  }
  if (!best) best = std::move(all);
  if (hi < per_chunk) strategy->mutable_recompute()->set_num_layers(hi);
  *explain = StrCat(head, "; selective ", Describe(selective), "; recomputing ",
                    hi < per_chunk ? StrCat("the first ", hi, " of each chunk's ", per_chunk,
                                            " layers")
                                   : std::string("every layer"),
                    " in full fits (", Describe(*best), ")");
  return best;
}

// SimulateGptWithinMemory by the levers that keep the strategy's
// recomputation: overlap given up, ZeRO-3's buckets kept.
StatusOr<GptSimulation> WithinMemoryAsRecomputed(const GptPrograms& programs,
                                                 proto::Strategy strategy,
                                                 const TimerFactory& timer, int64_t limit_bytes,
                                                 std::string* explain, proto::Strategy* chosen,
                                                 const SimulationOptions& options,
                                                 const PlanOptions& plan_options) {
  LOOM_ASSIGN_OR_RETURN(GptSimulation sim,
                        SimulateGpt(programs, strategy, timer, options, plan_options));
  const RankMetrics& first = sim.result.PeakRank();
  if (first.peak_bytes() <= limit_bytes && strategy.sharding().stage() == 3 &&
      strategy.sharding().keep_gathered_bytes() == 0) {
    LOOM_ASSIGN_OR_RETURN(sim, KeepGatheredWithin(programs, &strategy, timer,
                                                  limit_bytes, std::move(sim), explain, options,
                                                  plan_options));
    if (chosen != nullptr) *chosen = strategy;
    return sim;
  }
  if (first.peak_bytes() <= limit_bytes) {
    *explain = StrCat("memory limit ", Megabytes(limit_bytes), ": the plan fits (peak ",
                      Megabytes(first.peak_bytes()), " on rank ", first.rank, ")");
    if (chosen != nullptr) *chosen = strategy;
    return sim;
  }
  const int64_t uncapped = first.peak_bytes();
  const int uncapped_rank = first.rank;
  LOOM_ASSIGN_OR_RETURN(const ScheduleInfo* schedule,
                        FindSchedule(strategy.pipeline().schedule_mode()));
  if (!schedule->splits_jobs) {
    return FailedPrecondition(OverDeviceMemoryMessage(first, limit_bytes), " (",
                              schedule->name, " has no overlap to give up)");
  }
  // Less overlap until the peak fits: fewer micro-batches in flight, from
  // one below the schedule's own deepest (2p on stage 0) down to 2, and the
  // schedule with no jobs interleaved. Of those that fit, the fastest: a
  // shallow cap can cost more bubble than the overlap saves.
  const int deepest = strategy.pipeline().max_in_flight() > 0
                          ? strategy.pipeline().max_in_flight()
                          : 2 * std::max(1, strategy.pipeline().degree());
  std::optional<GptSimulation> capped;
  proto::Strategy capped_strategy = strategy;
  int64_t smallest = uncapped;
  for (int cap = deepest - 1; cap >= 2 && !capped; --cap) {
    capped_strategy.mutable_pipeline()->set_max_in_flight(cap);
    LOOM_ASSIGN_OR_RETURN(sim, SimulateGpt(programs, capped_strategy, timer, options,
                                           plan_options));
    smallest = std::min(smallest, sim.result.PeakRank().peak_bytes());
    if (sim.result.PeakRank().peak_bytes() <= limit_bytes) capped = std::move(sim);
  }
  std::optional<GptSimulation> plain;
  proto::Strategy plain_strategy = strategy;
  if (schedule->without_overlap != nullptr) {
    plain_strategy.mutable_pipeline()->set_schedule_mode(schedule->without_overlap);
    plain_strategy.mutable_pipeline()->clear_max_in_flight();
    LOOM_ASSIGN_OR_RETURN(sim, SimulateGpt(programs, plain_strategy, timer, options,
                                           plan_options));
    smallest = std::min(smallest, sim.result.PeakRank().peak_bytes());
    if (sim.result.PeakRank().peak_bytes() <= limit_bytes) plain = std::move(sim);
  }
  const std::string head = StrCat("memory limit ", Megabytes(limit_bytes), ": ", schedule->name,
                                  " peaks at ", Megabytes(uncapped), " on rank ", uncapped_rank);
  const auto& describe = Describe;
  if (capped && (!plain || capped->result.step_time_s <= plain->result.step_time_s)) {
    *explain = StrCat(head, "; at most ", capped_strategy.pipeline().max_in_flight(),
                      " micro-batches in flight per stage fit (", describe(*capped), ")",
                      plain ? StrCat(", faster than ", schedule->without_overlap, " (",
                                     describe(*plain), ")")
                            : std::string(),
                      ": giving up overlap for memory");
    if (chosen != nullptr) *chosen = capped_strategy;
    return std::move(*capped);
  }
  if (plain) {
    *explain = StrCat(head, "; ", schedule->without_overlap, " fits (", describe(*plain), ")",
                      capped ? StrCat(", faster than ", schedule->name, " at ",
                                      capped_strategy.pipeline().max_in_flight(),
                                      " micro-batches in flight (", describe(*capped), ")")
                             : std::string(),
                      ": giving up the interleaving for memory");
    if (chosen != nullptr) *chosen = plain_strategy;
    return std::move(*plain);
  }
  return FailedPrecondition("even with the least overlap the plan peaks at ", Megabytes(smallest),
                            ", above the memory limit of ", Megabytes(limit_bytes), " (rank ",
                            uncapped_rank, " peaks at ", Megabytes(uncapped), " uncapped)");
}

}  // namespace

StatusOr<GptSimulation> SimulateGptWithinMemory(const GptConfig& config,
                                                const OptimizerConfig& optimizer,
                                                proto::Strategy strategy,
                                                const TimerFactory& timer, int64_t limit_bytes,
                                                std::string* explain, proto::Strategy* chosen,
                                                const SimulationOptions& options,
                                                PlanOptions plan_options) {
  LOOM_ASSIGN_OR_RETURN(const AmpConfig amp, AmpConfigOf(strategy));
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<GptPrograms> programs,
                        GptPrograms::Build(config, optimizer, amp));
  StatusOr<GptSimulation> as_given =
      WithinMemoryAsRecomputed(*programs, strategy, timer, limit_bytes, explain, chosen,
                               options, plan_options);
  // Recomputation is chosen only where the strategy leaves it open (no
  // recompute.granularity, not even none), and only when nothing else fits:
  // the least recomputation is none.
  if (as_given.ok() || as_given.status().code() != StatusCode::kFailedPrecondition ||
      strategy.recompute().has_granularity()) {
    return as_given;
  }
  LOOM_ASSIGN_OR_RETURN(GptSimulation none,
                        SimulateGpt(*programs, strategy, timer, options, plan_options));
  std::string note;
  LOOM_ASSIGN_OR_RETURN(std::optional<GptSimulation> recomputed,
                        LeastRecomputeWithin(*programs, &strategy, timer, limit_bytes,
                                             none, &note, options, plan_options));
  if (recomputed) {
    *explain = note;
    if (chosen != nullptr) *chosen = strategy;
    return std::move(*recomputed);
  }
  // Every layer recomputed in full does not fit by itself: with the other
  // levers, or an error that says what recomputation did.
  StatusOr<GptSimulation> full =
      WithinMemoryAsRecomputed(*programs, strategy, timer, limit_bytes, explain, chosen,
                               options, plan_options);
  if (!full.ok()) {
    return FailedPrecondition(full.status().message(), " (recomputation: ", note, ")");
  }
  *explain = StrCat(note, "; with every layer recomputed in full, ", *explain);
  return full;
}

}  // namespace loom
