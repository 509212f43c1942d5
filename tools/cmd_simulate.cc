// loom simulate: one training step of a layout and schedule, or of a saved
// plan, timed by the cost model of a cluster: step time, bubbles, exposed
// communication and peak memory, as a table, JSON, a trace or a page.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "runtime/cost_model_timer.h"
#include "runtime/gpt_plan.h"
#include "runtime/simulation.h"
#include "cost_model/cluster.h"
#include "scheduler/memory_fit.h"
#include "scheduler/temporary_timeline.h"
#include "scheduler/timeline_html.h"
#include "scheduler/trace_compare.h"
#include "tools/command.h"
#include "tools/common_flags.h"
#include "tools/report_json.h"

DECLARE_bool(json);
DECLARE_string(plan);
DECLARE_string(trace);
DECLARE_int64(memory_limit);
DEFINE_string(html, "", "write the timeline as one self-contained HTML page here");
DEFINE_string(compare, "",
              "a trace of the same plan from 'loom run --trace' (or the rank files of a launch, "
              "comma-separated, or the --trace name the launch's ranks wrote them under): show where the simulated and the measured step differ, by op "
              "type, stream and instruction, with measured communication counted from its last "
              "party's arrival");
DEFINE_bool(fold_dp, true,
            "simulate one data-parallel replica for all, and without a trace one tensor-"
            "parallel peer of each stage for all, when they time alike (exact; off for "
            "clusters whose ranks share cores)");
DEFINE_int32(rank_rows, 16, "at most this many per-rank rows in the table");
DEFINE_string(against, "",
              "also simulate the same layout under this schedule (e.g. 1F1B against "
              "--schedule 1F1B-overlap) and report the step-time gain, the exposed "
              "communication and the peak memory of both; --html draws both timelines");

namespace loom {
namespace {

std::string Mb(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MB", bytes / 1e6);
  return buf;
}

std::string Ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", seconds * 1e3);
  return buf;
}

// The files of --compare: its comma-separated names, where a name that is
// no file but the --trace a launch's ranks wrote to (NAME.rank0.json,
// NAME.rank1.json, ...) stands for those files.
std::vector<std::string> TraceFiles(const std::string& flag) {
  std::vector<std::string> files;
  for (const std::string& name : CommaList(flag)) {
    if (std::filesystem::exists(name) || !std::filesystem::exists(name + ".rank0.json")) {
      files.push_back(name);  // (a missing file's error names it)
      continue;
    }
    for (int r = 0; std::filesystem::exists(StrCat(name, ".rank", r, ".json")); ++r) {
      files.push_back(StrCat(name, ".rank", r, ".json"));
    }
  }
  return files;
}

// A rank's memory: the persistables, the peak, and what the peak holds
// ("activations", "master weights", ...: MemoryBreakdown).
nlohmann::json MemoryJson(const RankMetrics& m) {
  nlohmann::json at_peak = nlohmann::json::object();
  for (const MemoryPart& p : MemoryBreakdown(m)) at_peak[p.name] = p.bytes;
  return {{"parameters", m.persistent.parameters},
          {"master_weights", m.persistent.master_weights},
          {"gradients", m.persistent.gradients},
          {"optimizer_state", m.persistent.optimizer_state},
          {"peak_temporaries", m.peak_temporary_bytes},
          {"peak", m.peak_bytes()},
          {"at_peak", at_peak},
          {"layers", m.layers},
          {"recomputed_layers", m.recomputed_layers}};
}

nlohmann::json ResultJson(const GptSimulation& sim, int64_t device_bytes) {
  const SimulationResult& r = sim.result;
  nlohmann::json j;
  // Whether each rank's peak fits its device (0: the cluster does not say).
  j["device_memory_bytes"] = device_bytes;
  j["step_time_s"] = r.step_time_s;
  j["bubble_fraction"] = r.bubble_fraction;
  j["exposed_comm_s"] = ExposedCommJson(r.exposed_comm_s);
  nlohmann::json peaks = nlohmann::json::array();
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankMetrics& m : r.ranks) {
    peaks.push_back(m.peak_bytes());
    nlohmann::json streams = nlohmann::json::object();
    for (const StreamMetrics& s : m.streams) streams[s.name] = s.busy_s;
    const RankCoords c = sim.graph.layout.Coords(m.rank);
    ranks.push_back({{"rank", m.rank},
                     {"coords", {{"dp", c.dp}, {"mp", c.mp}, {"pp", c.pp}}},
                     {"step_time_s", m.step_time_s},
                     {"bubble_fraction", m.bubble_fraction},
                     {"exposed_comm_s", ExposedCommJson(m.exposed_comm_s)},
                     {"busy_s", streams},
                     {"memory_bytes", MemoryJson(m)},
                     {"fits_device", device_bytes <= 0 || m.peak_bytes() <= device_bytes}});
  }
  j["peak_memory_bytes"] = peaks;
  j["ranks"] = ranks;
  return j;
}

// This schedule's figures against `base`'s (the --against schedule).
void PrintAgainst(const SimulationResult& r, const SimulationResult& base,
                  const std::string& base_schedule) {
  auto percent = [](double part, double whole) { return whole > 0 ? 100 * part / whole : 0.0; };
  std::printf("\nagainst %s:\n", base_schedule.c_str());
  const double gain = percent(base.step_time_s - r.step_time_s, base.step_time_s);
  std::printf("  step time      %s -> %s ms (%.2f%% %s)\n", Ms(base.step_time_s).c_str(),
              Ms(r.step_time_s).c_str(), std::fabs(gain), gain >= 0 ? "faster" : "slower");
  for (int c = 0; c < kNumCommCategories; ++c) {
    if (base.exposed_comm_s[c] == 0 && r.exposed_comm_s[c] == 0) continue;
    std::printf("  exposed %-8s %s -> %s ms (%.1f%% of %s's; %.2f%% of its step)\n",
                CommCategoryName(static_cast<CommCategory>(c)),
                Ms(base.exposed_comm_s[c]).c_str(), Ms(r.exposed_comm_s[c]).c_str(),
                percent(r.exposed_comm_s[c], base.exposed_comm_s[c]), base_schedule.c_str(),
                percent(base.exposed_comm_s[c], base.step_time_s));
  }
  const int64_t peak = r.PeakRank().peak_bytes(), base_peak = base.PeakRank().peak_bytes();
  std::printf("  peak memory    %s -> %s (%+.1f%%)\n", Mb(base_peak).c_str(), Mb(peak).c_str(),
              percent(static_cast<double>(peak - base_peak), static_cast<double>(base_peak)));
}

void PrintSummary(const GptSimulation& sim, const std::string& what, int64_t device_bytes) {
  const SimulationResult& r = sim.result;
  std::printf("simulate: %s; %zu rank%s (%d simulated); plan %.0f ms, lower %.0f ms, simulate "
              "%.0f ms\n",
              what.c_str(), r.ranks.size(), r.ranks.size() == 1 ? "" : "s", r.ranks_simulated,
              sim.plan_seconds * 1e3, sim.lower_seconds * 1e3, sim.simulate_seconds * 1e3);
  std::printf("step time      %s ms\n", Ms(r.step_time_s).c_str());
  std::printf("calc bubble    %.1f%% of the step (mean over ranks)\n", 100 * r.bubble_fraction);
  std::printf("exposed comm   mp %s ms, dp %s ms, p2p %s ms, sharding %s ms (mean over ranks)\n",
              Ms(r.exposed_comm_s[0]).c_str(), Ms(r.exposed_comm_s[1]).c_str(),
              Ms(r.exposed_comm_s[2]).c_str(), Ms(r.exposed_comm_s[3]).c_str());
  const RankMetrics* peak = &r.PeakRank();
  std::printf("peak memory    %s on rank %d: %s\n", Mb(peak->peak_bytes()).c_str(), peak->rank,
              MemoryBreakdownText(*peak, 1e6, "MB").c_str());
  const std::string fit = DeviceMemorySummary(r, device_bytes);
  if (!fit.empty()) std::printf("device memory  %s\n", fit.c_str());
  // One row per rank; past --rank_rows, one per pipeline stage (its first
  // rank: the others of a stage time alike on a symmetric cluster).
  const bool per_stage = static_cast<int>(r.ranks.size()) > FLAGS_rank_rows;
  std::printf("\n%6s %-16s %10s %7s %26s %10s\n", per_stage ? "stage" : "rank", "coords", "step ms",
              "bubble", "exposed mp/dp/p2p ms", "peak MB");
  int rows = 0;
  for (const RankMetrics& m : r.ranks) {
    const RankCoords c = sim.graph.layout.Coords(m.rank);
    if (per_stage && (c.dp != 0 || c.mp != 0)) continue;
    if (rows++ >= FLAGS_rank_rows) {
      std::printf("  ... (--rank_rows=%d; --json lists every rank)\n", FLAGS_rank_rows);
      break;
    }
    const std::string exposed = StrCat(Ms(m.exposed_comm_s[0]), " / ", Ms(m.exposed_comm_s[1]),
                                       " / ", Ms(m.exposed_comm_s[2]));
    std::printf("%6d %-16s %10s %6.1f%% %26s %10.1f\n", per_stage ? c.pp : m.rank,
                CoordsToString(c).c_str(), Ms(m.step_time_s).c_str(), 100 * m.bubble_fraction,
                exposed.c_str(), m.peak_bytes() / 1e6);
  }
}

}  // namespace

Status RunSimulate(const std::vector<std::string>& args) {
  if (!args.empty()) return InvalidArgument("unexpected argument '", args[0], "'");
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CostContext> costs, CostsFromFlags());
  const proto::Cluster& cluster = costs->cluster();
  TimerFactory timer = CostModelTimers(*costs);
  // Planned as `loom plan` plans the same flags, and without --cluster as
  // `loom run` does, so that a simulation and a run of the same flags have
  // the same plan.
  PlanOptions plan_options;
  plan_options.costs = costs.get();
  std::unique_ptr<CostContext> run_costs;
  if (!FlagGiven("cluster")) {
    LOOM_ASSIGN_OR_RETURN(run_costs, RunPlanningCostsFromFlags(&plan_options));
  }
  SimulationOptions options;
  options.fold_data_parallel = FLAGS_fold_dp;
  options.trace = !FLAGS_trace.empty() || !FLAGS_html.empty() || !FLAGS_compare.empty();
  // A trace draws every peer of a stage; the figures are the same folded.
  options.fold_tensor_parallel = FLAGS_fold_dp && !options.trace;

  if (FLAGS_memory_limit > 0 && !FLAGS_plan.empty()) {
    return InvalidArgument("--memory_limit chooses how a layout is planned; a --plan is fixed");
  }
  if (!FLAGS_against.empty() && !FLAGS_plan.empty()) {
    return InvalidArgument("--against simulates another schedule of a layout; a --plan fixes its "
                           "schedule");
  }
  if (FLAGS_memory_limit < 0) return InvalidArgument("--memory_limit must be positive, or 0");
  std::string what;
  std::string memory_note;   // what --memory_limit chose
  std::string sim_schedule;  // of the last simulation
  // `schedule`: instead of the strategy's (for --against).
  auto simulate = [&](const std::string& schedule) -> StatusOr<GptSimulation> {
    if (!FLAGS_plan.empty()) {
      for (const char* flag : {"preset", "dp", "mp", "pp", "micro_batches", "schedule", "vpp",
                               "config", "layers", "batch_size", "seq_len"}) {
        if (FlagGiven(flag)) {
          return InvalidArgument("--", flag, " cannot be combined with --plan: the plan fixes it");
        }
      }
      LOOM_ASSIGN_OR_RETURN(Plan plan, LoadPlan(FLAGS_plan));
      what = StrCat("plan ", FLAGS_plan, " (", plan.model_name, ", dp=", plan.layout.dp,
                    " mp=", plan.layout.mp, " pp=", plan.layout.pp, ", ",
                    plan.resolved.schedule_mode(), " over ", plan.resolved.micro_batches(),
                    " micro-batches)");
      return SimulatePlan(std::move(plan), timer, options);
    }
    LOOM_ASSIGN_OR_RETURN(proto::Strategy strategy, StrategyFromFlags());
    if (!schedule.empty()) {
      strategy.mutable_pipeline()->set_schedule_mode(schedule);
      LOOM_RETURN_IF_ERROR(ValidateStrategy(strategy, 0).WithContext("--against"));
    }
    LOOM_ASSIGN_OR_RETURN(GptConfig config, GptConfigFromFlags());
    LOOM_ASSIGN_OR_RETURN(OptimizerConfig opt, OptimizerConfigFromFlags());
    const ParallelLayout l = LayoutOf(strategy);
    sim_schedule = strategy.pipeline().schedule_mode();
    what = StrCat(config.name, ", dp=", l.dp, " mp=", l.mp, " pp=", l.pp, ", ",
                  strategy.pipeline().schedule_mode(), " over ",
                  MicroBatchesText(config, l.dp, strategy.pipeline().micro_batches()));
    if (l.world_size() > 64) {
      std::fprintf(stderr, "simulate: planning %d stages of %s for %d ranks...\n", l.pp,
                   config.name.c_str(), l.world_size());
    }
    if (FLAGS_memory_limit > 0) {
      return SimulateGptWithinMemory(config, opt, strategy, timer, FLAGS_memory_limit,
                                     &memory_note, nullptr, options, plan_options);
    }
    return SimulateGpt(config, opt, strategy, timer, options, plan_options);
  };
  std::optional<GptSimulation> base;
  std::string base_what;
  if (!FLAGS_against.empty()) {
    LOOM_ASSIGN_OR_RETURN(base, simulate(FLAGS_against));
    base_what = what;
  }
  LOOM_ASSIGN_OR_RETURN(GptSimulation sim, simulate(""));
  const auto* cost = dynamic_cast<const CostModelTimer*>(sim.timer.get());
  what += StrCat(", cluster ", cluster.name());
  if (cost != nullptr) {
    const auto& n = cost->rule_counts();
    what += StrCat(" (ops priced: ", n[0], " profiled, ", n[1], " scaled, ", n[2], " roofline)");
  }

  if (!FLAGS_trace.empty()) {
    LOOM_ASSIGN_OR_RETURN(std::vector<TemporaryTimeline> timelines,
                          ReplayTracedRanks(sim.graph, sim.result.trace));
    LOOM_RETURN_IF_ERROR(
        WriteChromeTrace(sim.result.trace, FLAGS_trace, TemporaryCounters(timelines)));
  }
  std::vector<TimelinePanel> panels;
  std::string comparison;
  if (!FLAGS_compare.empty()) {
    // One file, or one per rank of a launch (comma-separated, or the
    // --trace name the launch was given).
    std::vector<TraceEvent> measured;
    for (const std::string& file : TraceFiles(FLAGS_compare)) {
      LOOM_ASSIGN_OR_RETURN(std::vector<TraceEvent> part, ReadChromeTrace(file));
      measured.insert(measured.end(), part.begin(), part.end());
    }
    StatusOr<TraceComparison> c = CompareTraces(measured, sim.result.trace, sim.graph);
    if (!c.ok()) return c.status().WithContext(FLAGS_compare);
    comparison = TraceComparisonToString(*c);
    panels.push_back({StrCat("measured (", FLAGS_compare, ")"),
                      StrCat("step ", Ms(c->measured_step_s), " ms"), std::move(measured)});
  }
  if (!FLAGS_html.empty()) {
    if (base.has_value()) {
      panels.push_back({StrCat(FLAGS_against, ", simulated on ", cluster.name()),
                        StrCat("step ", Ms(base->result.step_time_s), " ms, calc bubble ",
                               static_cast<int>(100 * base->result.bubble_fraction + 0.5),
                               "%, exposed mp ", Ms(base->result.exposed_comm_s[0]), " ms"),
                        base->result.trace});
    }
    panels.push_back({StrCat(base.has_value() ? StrCat(sim_schedule, ", ") : std::string(),
                             "simulated on ", cluster.name()),
                      StrCat("step ", Ms(sim.result.step_time_s), " ms, calc bubble ",
                             static_cast<int>(100 * sim.result.bubble_fraction + 0.5), "%",
                             base.has_value()
                                 ? StrCat(", exposed mp ", Ms(sim.result.exposed_comm_s[0]), " ms")
                                 : std::string()),
                      sim.result.trace});
    LOOM_RETURN_IF_ERROR(WriteTimelineHtml(FLAGS_html, what, panels));
  }
  if (FLAGS_json) {
    const int64_t device_bytes = DeviceMemoryLimit(cluster);
    nlohmann::json j = ResultJson(sim, device_bytes);
    if (base.has_value()) {
      j["against"] = {{"schedule", FLAGS_against}, {"result", ResultJson(*base, device_bytes)}};
    }
    std::cout << j.dump() << "\n";
    return Status::OK();
  }
  PrintSummary(sim, what, DeviceMemoryLimit(cluster));
  if (!memory_note.empty()) std::printf("\n%s\n", memory_note.c_str());
  if (base.has_value()) PrintAgainst(sim.result, base->result, FLAGS_against);
  if (!comparison.empty()) std::printf("\n%s", comparison.c_str());
  return Status::OK();
}

}  // namespace loom
