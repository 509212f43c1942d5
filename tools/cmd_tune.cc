// loom tune: the fastest strategy that fits, found by simulating the
// strategy space (runtime/tuner.h); -o saves its plan for `loom run --plan`.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "cost_model/cluster.h"
#include "cost_model/comm_model.h"
#include "framework/file_util.h"
#include "framework/median.h"
#include "profiling/tune_profile_picks.h"
#include "runtime/gpt_plan.h"
#include "runtime/tuner.h"
#include "scheduler/plan_verifier.h"
#include "tools/command.h"
#include "tools/common_flags.h"
#include "tools/flag_groups.h"
#include "tools/profile_util.h"
#include "tools/report_json.h"

DEFINE_int32(devices, 0, "the devices (ranks) to plan for");
DEFINE_int32(top, 5, "print this many of the fastest plans that fit");
DEFINE_int32(tune_threads, 2, "simulate this many candidates at once");
DEFINE_string(schedules, "",
              "comma-separated pipeline schedules to try (default: every one)");
DEFINE_int32(max_vpp, loom::TuneSpace().max_vpp, "the most VPP chunks a stage to try");
DEFINE_bool(exhaustive, false,
            "simulate every candidate the space's rules let through, skipping none by the "
            "time bound or by less recomputation fitting (slow; checks the search)");
DEFINE_double(search_seconds, 0,
              "stop simulating candidates after about this many seconds and print the best "
              "plans found by then, with how many candidates were left unsearched (0: search "
              "to the end)");
DEFINE_bool(refine, loom::TuneSpace().refine,
            "after the search, turn the winner's recomputed layers, gradient bucket size and "
            "ZeRO fetching one at a time, keeping a value that steps 0.5% faster "
            "(runtime/tune_refine.h)");
DEFINE_bool(list_candidates, false,
            "print every candidate the space's rules let through with its time and memory "
            "bounds, cheapest bound first, and stop before simulating any");
DEFINE_bool(profile_ops, false,
            "before searching, time into --cost_table every op the candidates run that it "
            "lacks, each inside the steps of the plainest candidate that runs it (this host's "
            "CPU: a CPU --cluster); each plan's profile is written as it ends, so that an "
            "interrupted run keeps what it finished and a second run times only the rest");
DEFINE_int32(profile_rounds, 3,
             "--profile_ops: time the picked plans this many times over, each time "
             "--profile_samples / rounds steps (rounded up), and keep each plan's fastest "
             "round: a slow minute of the host slows a round of each plan rather than one "
             "plan, and the least slowed round is the nearest to the plan's own speed");
DECLARE_bool(explain);
DECLARE_bool(json);
DECLARE_string(o);

namespace loom {
namespace {

std::string Ms(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", s * 1e3);
  return buf;
}

// "40 s", "7 min": how long the rest of a profile will take, as a user
// plans around it.
std::string RoughDuration(double s) {
  if (s < 90) return StrCat(static_cast<int>(std::lround(s)), " s");
  return StrCat(static_cast<int>(std::lround(s / 60)), " min");
}

// Past this median of each plan's slowest round over its fastest, in
// percent, the host's noise, not the plans, decides orders closer than it
// (a plan's rounds run the same steps; only the host differs between them).
constexpr int kNoisyRoundSpreadPercent = 10;

// A progress line on a terminal, redrawn each round; elsewhere one line
// every 10 seconds.
class ProgressLine {
 public:
  void operator()(const TuneProgress& p) {
    const auto now = std::chrono::steady_clock::now();
    const bool tty = isatty(STDERR_FILENO);
    if (!tty && now - last_ < std::chrono::seconds(10)) return;
    last_ = now;
    std::fprintf(stderr, "%stune: %d of %d candidates, %d simulated, best %s%s",
                 tty ? "\r" : "", p.done, p.candidates, p.simulated,
                 p.best.empty() ? "-" : StrCat(Ms(p.best_step_s), " ms (", p.best, ")").c_str(),
                 tty ? "" : "\n");
    drew_ = drew_ || tty;
  }
  ~ProgressLine() {
    if (drew_) std::fprintf(stderr, "\n");
  }

 private:
  std::chrono::steady_clock::time_point last_{};
  bool drew_ = false;
};

void PrintReport(const TuneReport& r, const GptConfig& config, const TuneOptions& o,
                 const std::string& cluster) {
  int pruned = 0;
  for (const auto& [rule, n] : r.pruned) pruned += n;
  std::printf("tune: %s on %d devices of cluster %s: %d candidates considered, %zu simulated "
              "(%d over the memory limit), %d pruned, %zu failed, in %.1f s\n",
              config.name.c_str(), o.space.devices, cluster.c_str(), r.considered,
              r.simulated.size(), r.over_memory, pruned, r.failed.size(), r.seconds);
  for (const auto& [rule, n] : r.pruned) std::printf("  pruned %6d: %s\n", n, rule.c_str());
  if (r.unsearched > 0) {
    std::printf(
        "  stopped at --search_seconds: %d candidates neither simulated nor skipped; "
        "a plan among them may be faster than the ones below, and the winner was not "
        "refined\n",
        r.unsearched);
  }
  for (const auto& [name, why] : r.failed) {
    std::printf("  failed: %s: %s\n", name.c_str(), why.c_str());
  }
  if (r.top.empty()) {
    std::printf("no plan fits%s\n",
                o.memory_limit_bytes > 0
                    ? StrCat(" in ", o.memory_limit_bytes / 1e9, " GB (--memory_limit)").c_str()
                    : "");
    return;
  }
  int width = 44;
  for (const TunedPlan& p : r.top) {
    width = std::max(width, static_cast<int>(p.candidate.name.size()));
  }
  std::printf("\n%3s  %-*s %10s %11s %6s %10s %30s %7s\n", "#", width, "plan", "step ms",
              "tokens/s", "MFU", "peak MB", "exposed mp/dp/p2p/shard ms", "bubble");
  for (size_t i = 0; i < r.top.size(); ++i) {
    const TunedPlan& p = r.top[i];
    const std::string exposed =
        StrCat(Ms(p.exposed_comm_s[0]), "/", Ms(p.exposed_comm_s[1]), "/",
               Ms(p.exposed_comm_s[2]), "/", Ms(p.exposed_comm_s[3]));
    std::printf("%3zu  %-*s %10s %11.0f %5.1f%% %10.1f %30s %6.1f%%\n", i + 1, width,
                p.candidate.name.c_str(), Ms(p.step_time_s).c_str(), p.tokens_per_s,
                100 * p.mfu, p.peak_bytes / 1e6, exposed.c_str(), 100 * p.bubble_fraction);
    if (!p.equivalents.empty()) {
      std::string names;
      for (const std::string& e : p.equivalents) names += (names.empty() ? "" : "; ") + e;
      std::printf("     (timed alike: %s)\n", names.c_str());
    }
  }
  if (o.memory_limit_bytes >= 1000000000) {
    std::printf("(every plan above fits %.2f GB a rank)\n", o.memory_limit_bytes / 1e9);
  } else if (o.memory_limit_bytes > 0) {
    std::printf("(every plan above fits %.2f MB a rank)\n", o.memory_limit_bytes / 1e6);
  }
}

nlohmann::json TunedPlanJson(const TunedPlan& p) {
  return {{"name", p.candidate.name},
          // As `loom run --config FILE` reads it.
          {"strategy", TextProtoToString(p.candidate.strategy)},
          {"step_time_s", p.step_time_s},
          {"fits", p.fits},
          {"peak_bytes", p.peak_bytes},
          {"peak_rank", p.peak_rank},
          {"bubble_fraction", p.bubble_fraction},
          {"exposed_comm_s", ExposedCommJson(p.exposed_comm_s)},
          {"tokens_per_s", p.tokens_per_s},
          {"mfu", p.mfu},
          {"time_bound_s", p.candidate.time_bound_s},
          {"memory_bound_bytes", p.candidate.memory_bound_bytes}};
}

// --json: the report as one document, every simulated plan with the
// strategy that reproduces it (scripts/tuner_accuracy.py runs them).
nlohmann::json ReportJson(const TuneReport& r, const GptConfig& config, const TuneOptions& o,
                          const std::string& cluster) {
  nlohmann::json j;
  j["model"] = config.name;
  j["devices"] = o.space.devices;
  j["cluster"] = cluster;
  j["memory_limit_bytes"] = o.memory_limit_bytes;
  j["considered"] = r.considered;
  j["candidates"] = r.candidates;
  j["pruned"] = r.pruned;
  j["over_memory"] = r.over_memory;
  j["unsearched"] = r.unsearched;
  j["seconds"] = r.seconds;
  nlohmann::json failed = nlohmann::json::array();
  for (const auto& [name, why] : r.failed) failed.push_back({{"name", name}, {"error", why}});
  j["failed"] = failed;
  j["search_best"] = r.search_best;
  nlohmann::json refined = nlohmann::json::array();
  for (const RefinedKnob& k : r.refined) {
    refined.push_back({{"knob", k.knob}, {"outcome", k.outcome}});
  }
  j["refined"] = refined;
  j["declined"] = r.declined;
  nlohmann::json top = nlohmann::json::array();
  for (const TunedPlan& p : r.top) top.push_back(p.candidate.name);
  j["top"] = top;
  nlohmann::json simulated = nlohmann::json::array();
  for (const TunedPlan& p : r.simulated) simulated.push_back(TunedPlanJson(p));
  j["simulated"] = simulated;
  return j;
}

// --list_candidates: the space as the search would take it.
Status ListCandidates(const GptConfig& config, const OptimizerConfig& opt, const CostContext& costs,
                      const TuneOptions& o) {
  LOOM_ASSIGN_OR_RETURN(TuneSpaceResult space, EnumerateTuneSpace(config, opt, o.base, costs,
                                                                  o.space, o.memory_limit_bytes));
  std::printf("%d candidates considered, %zu let through\n", space.considered,
              space.candidates.size());
  for (const auto& [rule, n] : space.pruned) std::printf("  pruned %6d: %s\n", n, rule.c_str());
  std::printf("%12s %12s  %s\n", "bound ms", "bound MB", "candidate");
  for (size_t i : CheapestBoundFirst(space.candidates)) {
    const TuneCandidate& c = space.candidates[i];
    std::printf("%12s %12.1f  %s\n", Ms(c.time_bound_s).c_str(), c.memory_bound_bytes / 1e6,
                c.name.c_str());
  }
  return Status::OK();
}

// --profile_ops: the picks' profiles into the cost table, each keeping the
// signatures it was picked for (tune_profile_picks.h). Progress and the
// summary go to stderr, so that --json's stdout holds the document alone.
Status ProfileTuneOps(const GptConfig& config, const OptimizerConfig& opt, const CostContext& costs,
                      const TuneOptions& o) {
  const proto::Cluster& cluster = costs.cluster();
  LOOM_RETURN_IF_ERROR(CheckCpu(cluster, "loom tune --profile_ops times"));
  if (FLAGS_profile_rounds < 1 || FLAGS_profile_rounds > 100) {
    return InvalidArgument("--profile_rounds must be 1..100, got ", FLAGS_profile_rounds);
  }
  LOOM_ASSIGN_OR_RETURN(PlanOpProfileOptions timing, PlanOpProfileOptionsFromFlags());
  LOOM_ASSIGN_OR_RETURN(const double pressure_before, WaitForQuietCpuFromFlags());
  const std::string path = CostTablePathFromFlags();
  LOOM_ASSIGN_OR_RETURN(const CostTable table, CostTable::LoadOrEmpty(path));
  LOOM_ASSIGN_OR_RETURN(TuneSpaceResult space, EnumerateTuneSpace(config, opt, o.base, costs,
                                                                  o.space, o.memory_limit_bytes));
  // Planned as `loom run` plans them, since their steps are timed.
  PlanOptions plan_options;
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CostContext> run_costs,
                        RunPlanningCostsFromFlags(&plan_options));
  const std::string& device = TableDevice(cluster);
  std::fprintf(stderr, "profile: planning the %zu candidates for the ops they run ...\n",
               space.candidates.size());
  LOOM_ASSIGN_OR_RETURN(
      std::vector<ProfilePick> picks,
      PicksToProfile(config, opt, space.candidates, table, device, timing.alone, plan_options));
  size_t lacking = 0;
  for (const ProfilePick& p : picks) lacking += p.signatures.size();
  if (picks.empty()) {
    std::fprintf(stderr, "profile: %s has every op the %zu candidates run\n", path.c_str(),
                 space.candidates.size());
    return Status::OK();
  }
  std::fprintf(stderr,
               "profile: %zu op signatures the %zu candidates run are not in %s; "
               "timing them in %zu plans\n",
               lacking, space.candidates.size(), path.c_str(), picks.size());
  const auto start = std::chrono::steady_clock::now();
  std::vector<const Plan*> plans;
  for (const ProfilePick& pick : picks) plans.push_back(&pick.plan);
  timing.step.cache_share = RankCacheShare(cluster, o.space.devices);
  // Each plan's last round's wall time: after the first round, what is
  // left is about those again, over the rounds still to run.
  std::vector<double> plan_seconds(picks.size(), 0);
  auto plan_start = std::chrono::steady_clock::now();
  const auto progress = [&](int round, size_t i) {
    const size_t n = picks[i].signatures.size();
    std::string left;
    if (round > 0) {
      const double per_round = std::accumulate(plan_seconds.begin(), plan_seconds.end(), 0.0);
      const double this_round = std::accumulate(plan_seconds.begin() + i, plan_seconds.end(), 0.0);
      left = ", about " +
             RoughDuration(this_round + (FLAGS_profile_rounds - round - 1) * per_round) + " left";
    }
    std::fprintf(stderr, "profile round %d/%d, plan %zu/%zu: %s (%zu signature%s%s)\n", round + 1,
                 FLAGS_profile_rounds, i + 1, picks.size(),
                 space.candidates[picks[i].candidate].name.c_str(), n, n == 1 ? "" : "s",
                 left.c_str());
    plan_start = std::chrono::steady_clock::now();
  };
  // A plan's round goes into the table as it ends where it is the plan's
  // fastest so far (replacing its slower rounds' entries in place), so that
  // an interrupted run keeps what it finished and a second run times only
  // the rest; the last write leaves what one write at the end would.
  int added = 0;
  const auto write_table = [&](int /*round*/, size_t i, const RoundsProfile& so_far) -> Status {
    plan_seconds[i] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - plan_start).count();
    const std::vector<double>& rounds = so_far.round_seconds[i];
    if (rounds.back() > *std::min_element(rounds.begin(), rounds.end())) return Status::OK();
    const std::set<std::string> wanted(picks[i].signatures.begin(), picks[i].signatures.end());
    CostTable::MergeCounts counts;
    LOOM_RETURN_IF_ERROR(
        MergeIntoCostTable(path, CostEntriesOf(so_far.fastest[i], device, &wanted), &counts)
            .status());
    added += counts.added;
    return Status::OK();
  };
  LOOM_ASSIGN_OR_RETURN(
      const RoundsProfile profiles,
      ProfilePlansInRounds(config, plans, FLAGS_profile_rounds, timing, progress, write_table));
  if (FLAGS_profile_rounds > 1) {
    // How far the host's noise moved the rounds: the user's measure of how
    // much a single round could have been trusted.
    std::vector<double> spread;
    size_t widest = 0;
    for (size_t i = 0; i < picks.size(); ++i) {
      const std::vector<double>& s = profiles.round_seconds[i];
      const double lo = *std::min_element(s.begin(), s.end());
      spread.push_back(lo > 0 ? *std::max_element(s.begin(), s.end()) / lo : 1.0);
      if (spread.back() > spread[widest]) widest = i;
    }
    const double median_spread = Median(spread);
    std::fprintf(stderr,
                 "profile: each plan's slowest round over its fastest (kept): median %.2f, "
                 "largest %.2f (%s)\n",
                 median_spread, spread[widest],
                 space.candidates[picks[widest].candidate].name.c_str());
    const int spread_percent = static_cast<int>(std::lround(100 * (median_spread - 1)));
    if (spread_percent > kNoisyRoundSpreadPercent) {
      std::fprintf(stderr,
                   "profile: warning: the host's speed moved between rounds (median %d%%); "
                   "plans simulated within about that of each other may run in another order "
                   "(a quieter host, or more --profile_rounds, profiles better)\n",
                   spread_percent);
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "profile: %d entries added to %s in %.1f s\n", added, path.c_str(), seconds);
  if (const std::string note = PressureNote(pressure_before); !note.empty()) {
    std::fprintf(stderr, "profile: %s\n", note.c_str());
  }
  return Status::OK();
}

}  // namespace

Status RunTune(const std::vector<std::string>& args) {
  if (!args.empty()) return InvalidArgument("unexpected argument '", args[0], "'");
  if (FLAGS_devices < 1) return InvalidArgument("--devices must be at least 1, got ", FLAGS_devices);
  if (FLAGS_top < 1) return InvalidArgument("--top must be at least 1, got ", FLAGS_top);
  if (FLAGS_tune_threads < 1 || FLAGS_tune_threads > 256) {
    return InvalidArgument("--tune_threads must be 1..256, got ", FLAGS_tune_threads);
  }
  if (!std::isfinite(FLAGS_search_seconds) || FLAGS_search_seconds < 0) {
    return InvalidArgument(
        "--search_seconds must be 0 (no limit) or a positive number of "
        "seconds, got ",
        FLAGS_search_seconds);
  }
  LOOM_ASSIGN_OR_RETURN(proto::Strategy base, StrategyFromFlags());
  LOOM_ASSIGN_OR_RETURN(GptConfig config, GptConfigFromFlags());
  LOOM_ASSIGN_OR_RETURN(OptimizerConfig opt, OptimizerConfigFromFlags());
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CostContext> costs, CostsFromFlags());

  TuneOptions o;
  o.base = base;
  o.space.devices = FLAGS_devices;
  o.space.max_vpp = FLAGS_max_vpp;
  o.space.refine = FLAGS_refine;
  if (!FLAGS_schedules.empty()) o.space.schedules = CommaList(FLAGS_schedules);
  LOOM_ASSIGN_OR_RETURN(o.memory_limit_bytes, MemoryLimitFromFlags());
  o.top_k = FLAGS_top;
  o.threads = FLAGS_tune_threads;
  o.exhaustive = FLAGS_exhaustive;
  o.time_limit_s = FLAGS_search_seconds;
  if (FLAGS_list_candidates) return ListCandidates(config, opt, *costs, o);
  if (!FLAGS_profile_ops) {
    FlagGroup timing = kOpTimingFlags;
    timing.push_back("profile_rounds");
    for (const char* flag : timing) {
      if (FlagGiven(flag)) {
        return InvalidArgument("--", flag, " times ops for --profile_ops, which was not given");
      }
    }
  }
  if (FLAGS_profile_ops) {
    LOOM_RETURN_IF_ERROR(ProfileTuneOps(config, opt, *costs, o));
    LOOM_ASSIGN_OR_RETURN(costs, CostsFromFlags());  // with what it timed
  }
  ProgressLine progress;
  o.progress = [&progress](const TuneProgress& p) { progress(p); };
  LOOM_ASSIGN_OR_RETURN(TuneReport report, Tune(config, opt, *costs, o));
  o.progress = nullptr;
  if (FLAGS_json) {
    // stdout holds the document alone; -o's line goes to stderr.
    nlohmann::json j = ReportJson(report, config, o, costs->cluster().name());
    if (FLAGS_explain) j["explain"] = ExplainWinner(report, o);
    std::printf("%s\n", j.dump(1).c_str());
  } else {
    PrintReport(report, config, o, costs->cluster().name());
    if (FLAGS_explain) {
      std::printf("\n");
      for (const std::string& line : ExplainWinner(report, o)) std::printf("%s\n", line.c_str());
    }
  }
  if (FLAGS_o.empty()) return Status::OK();
  if (report.top.empty()) return FailedPrecondition("-o: no plan fits, nothing to write");
  // The winner as `loom plan --cluster` plans it: every rank, the pipeline
  // cut by this cluster's costs, verified.
  PlanOptions plan_options;
  plan_options.costs = costs.get();
  LOOM_ASSIGN_OR_RETURN(Plan plan,
                        PlanGpt(config, opt, report.top.front().candidate.strategy, {},
                                plan_options));
  LOOM_RETURN_IF_ERROR(VerifyPlan(plan).WithContext("plan verifier"));
  LOOM_RETURN_IF_ERROR(SavePlan(plan, FLAGS_o));
  std::fprintf(FLAGS_json ? stderr : stdout,
               "\nwrote %s (%s); run it with: loom run --plan %s --steps N\n", FLAGS_o.c_str(),
               report.top.front().candidate.name.c_str(), FLAGS_o.c_str());
  return Status::OK();
}

}  // namespace loom
