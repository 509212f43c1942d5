// loom tune's search (runtime/tuner.h): its bounds hold for every plan it
// simulates, its skips never lose the exhaustive search's winner, a plan
// it rules out for memory really is over the limit, it answers the same
// whatever its threads, and what it picks trains as serial does.
#include "runtime/tuner.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "cost_model/cluster.h"
#include "cost_model/cost_context.h"
#include "runtime/gpt_plan.h"
#include "runtime/simulation.h"
#include "scheduler/plan_verifier.h"
#include "unittests/loom_cli.h"
#include "unittests/parameter_compare.h"
#include "unittests/test_plan_options.h"

namespace loom {
namespace {

GptConfig Tiny() {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.batch_size = 8;
  return c;
}

struct Tuned {
  TuneReport report;
};

// The search alone unless `refine` (runtime/tune_refine.h).
Tuned TuneTiny(const GptConfig& c, int devices, bool exhaustive, int threads = 2,
               int64_t memory_limit = 0, bool refine = false) {
  static const proto::Cluster cluster = LoadCluster("local").value();
  static const CostContext costs(cluster, CostTable());
  TuneOptions o;
  o.space.devices = devices;
  o.exhaustive = exhaustive;
  o.threads = threads;
  o.memory_limit_bytes = memory_limit;
  o.space.refine = refine;
  auto r = Tune(c, OptimizerConfig(), costs, o);
  EXPECT_TRUE(r.ok()) << r.status();
  Tuned t;
  if (r.ok()) t.report = std::move(*r);
  return t;
}

// gpt-tiny's whole space on 4 ranks, every candidate simulated: shared by
// the tests that check the search against it.
const Tuned& Exhaustive() {
  static const Tuned* const all = new Tuned(TuneTiny(Tiny(), 4, /*exhaustive=*/true));
  return *all;
}

std::map<std::string, const TunedPlan*> ByName(const TuneReport& r) {
  std::map<std::string, const TunedPlan*> out;
  for (const TunedPlan& p : r.simulated) out[p.candidate.name] = &p;
  return out;
}

// Every simulated plan steps no faster than its time bound and peaks no
// lower than its memory bound: the bounds are bounds.
TEST(Tuner, BoundsHoldForEveryPlanSimulated) {
  const Tuned& all = Exhaustive();
  ASSERT_GT(all.report.simulated.size(), 200u);
  EXPECT_TRUE(all.report.failed.empty()) << all.report.failed.front().first << ": "
                                         << all.report.failed.front().second;
  double tightest = 0;
  for (const TunedPlan& p : all.report.simulated) {
    SCOPED_TRACE(p.candidate.name);
    EXPECT_LE(p.candidate.time_bound_s, p.step_time_s);
    EXPECT_LE(p.candidate.memory_bound_bytes, p.peak_bytes);
    tightest = std::max(tightest, p.candidate.time_bound_s / p.step_time_s);
  }
  // Not vacuous: some bound comes within 4x of its plan's step (0.30 of it
  // measured: gpt-tiny's steps on `local` are mostly per-op and
  // communication latency, which the bounds leave out).
  EXPECT_GT(tightest, 0.25);
}

// The skips (time bound, cheaper siblings that fit) keep the exhaustive
// search's winner, with fewer simulations; the same with a memory limit
// that rules out most plans, where every plan the memory bound drops
// before simulating is, simulated, over the limit.
TEST(Tuner, PrunedSearchFindsTheExhaustiveWinner) {
  const GptConfig c = Tiny();
  const Tuned& all = Exhaustive();
  const auto everything = ByName(all.report);
  ASSERT_FALSE(all.report.top.empty());
  std::vector<int64_t> peaks;
  for (const TunedPlan& p : all.report.simulated) peaks.push_back(p.peak_bytes);
  std::sort(peaks.begin(), peaks.end());
  for (const int64_t limit : {int64_t{0}, peaks[peaks.size() / 5]}) {
    SCOPED_TRACE(StrCat("memory limit ", limit));
    const Tuned pruned = TuneTiny(c, 4, false, 2, limit);
    ASSERT_FALSE(pruned.report.top.empty());
    // The exhaustive winner under this limit.
    const TunedPlan* best = nullptr;
    for (const TunedPlan& p : all.report.simulated) {
      if (limit > 0 && p.peak_bytes > limit) continue;
      if (best == nullptr || p.step_time_s < best->step_time_s) best = &p;
    }
    ASSERT_NE(best, nullptr);
    EXPECT_EQ(pruned.report.top.front().step_time_s, best->step_time_s)
        << pruned.report.top.front().candidate.name << " against " << best->candidate.name;
    // No plan with recomputation is simulated beside its sibling without,
    // when that fits: the search holds it back until the sibling's outcome
    // can skip it, even where both fall in one round.
    const auto simulated = ByName(pruned.report);
    int held_back = 0;
    for (const auto& [name, plan] : simulated) {
      if (plan->candidate.strategy.recompute().granularity() == "none") continue;
      proto::Strategy without = plan->candidate.strategy;
      without.mutable_recompute()->set_granularity("none");
      auto sibling = simulated.find(TuneCandidateName(without));
      if (sibling != simulated.end()) {
        EXPECT_FALSE(sibling->second->fits) << name << " was simulated beside " << sibling->first;
      }
    }
    for (const auto& [name, outcome] : pruned.report.outcomes) {
      held_back += outcome == "skipped: the same plan without recomputation fits";
    }
    EXPECT_GT(held_back, 0);
    if (limit == 0) {
      // 394 of 684 measured.
      EXPECT_LT(pruned.report.simulated.size(), all.report.simulated.size() * 2 / 3);
      continue;
    }
    // What the space dropped for memory: over the limit when simulated.
    const std::set<std::string> kept = [&] {
      std::set<std::string> names;
      for (const auto& [name, outcome] : pruned.report.outcomes) names.insert(name);
      return names;
    }();
    int dropped = 0;
    for (const auto& [name, plan] : everything) {
      if (kept.count(name) > 0) continue;
      EXPECT_GT(plan->peak_bytes, limit) << name;
      ++dropped;
    }
    EXPECT_GT(pruned.report.pruned.at(
                  "its memory bound exceeds the limit"),
              0);
    EXPECT_GT(dropped, 0);
    for (const TunedPlan& p : pruned.report.top) EXPECT_LE(p.peak_bytes, limit);
  }
}

// Skips are decided between rounds of a fixed size, so one thread or three
// give the same report. (On 2 ranks: a smaller space, still many rounds.)
TEST(Tuner, SameAnswerWhateverTheThreads) {
  Tuned one = TuneTiny(Tiny(), 2, false, 1, 0, /*refine=*/true);
  const Tuned two = TuneTiny(Tiny(), 2, false, 3, 0, /*refine=*/true);
  EXPECT_GT(one.report.simulated.size(), 3u * 8);
  // Skips that depend on what earlier rounds found happened.
  EXPECT_GT(one.report.pruned["the same plan without recomputation fits"], 0);
  ASSERT_EQ(one.report.top.size(), two.report.top.size());
  for (size_t i = 0; i < one.report.top.size(); ++i) {
    EXPECT_EQ(one.report.top[i].candidate.name, two.report.top[i].candidate.name);
    EXPECT_EQ(one.report.top[i].step_time_s, two.report.top[i].step_time_s);
  }
  EXPECT_EQ(one.report.pruned, two.report.pruned);
  EXPECT_EQ(one.report.simulated.size(), two.report.simulated.size());
}

// The winner on 4 ranks is a whole plan the verifier accepts, and training
// it follows serial training parameter by parameter.
TEST(Tuner, TheWinnerVerifiesAndTrainsAsSerial) {
  const GptConfig c = Tiny();
  OptimizerConfig sgd;
  sgd.type = "sgd";
  sgd.learning_rate = 0.5f;
  static const proto::Cluster cluster = LoadCluster("local").value();
  const CostContext costs(cluster, CostTable());
  TuneOptions o;
  o.space.devices = 4;
  o.top_k = 1;  // only the winner: the bound skips the most
  auto report = Tune(c, sgd, costs, o);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_FALSE(report->top.empty());
  const proto::Strategy& winner = report->top.front().candidate.strategy;
  SCOPED_TRACE(report->top.front().candidate.name);
  auto plan = PlanGpt(c, sgd, winner, {}, LocalPlanOptions());
  ASSERT_TRUE(plan.ok()) << plan.status();
  Status verified = VerifyPlan(*plan);
  EXPECT_TRUE(verified.ok()) << verified;

  auto serial = SerialTrainer::Create(c, sgd).value();
  ParallelTrainer::Options options;
  options.comm.timeout = std::chrono::seconds(30);
  auto t = ParallelTrainer::Create(c, sgd, winner, options);
  ASSERT_TRUE(t.ok()) << t.status();
  for (int s = 0; s < 2; ++s) {
    ASSERT_TRUE(serial->Step(s).ok());
    auto loss = (*t)->Step(s);
    ASSERT_TRUE(loss.ok()) << loss.status();
  }
  EXPECT_GE(ExpectEveryParameterMatches(**t, *serial, 2e-5), 2 * 12 + 4);
}

// A time limit the first round already passes stops the search there: the
// rest is counted as unsearched, not as pruned or simulated, and the best
// plan found so far still leads the report.
TEST(Tuner, TimeLimitStopsAfterTheRoundThatPassesIt) {
  static const proto::Cluster cluster = LoadCluster("local").value();
  const CostContext costs(cluster, CostTable());
  TuneOptions o;
  o.space.devices = 4;
  o.time_limit_s = 1e-9;
  auto stopped = Tune(Tiny(), {}, costs, o);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  const TuneReport& r = *stopped;
  EXPECT_GT(r.unsearched, 0);
  EXPECT_GE(r.simulated.size(), 1u);
  EXPECT_LE(r.simulated.size(), 8u);  // one round
  ASSERT_FALSE(r.top.empty());
  double fastest = 1e30;
  for (const TunedPlan& p : r.simulated) {
    if (p.fits) fastest = std::min(fastest, p.step_time_s);
  }
  EXPECT_EQ(r.top.front().step_time_s, fastest);
  int skipped = 0;
  for (const auto& [name, outcome] : r.outcomes) skipped += outcome.rfind("skipped", 0) == 0;
  EXPECT_EQ(static_cast<int>(r.simulated.size()) + skipped + r.unsearched, r.candidates);
  // The same search without a limit runs to the end.
  o.time_limit_s = 0;
  auto whole = Tune(Tiny(), {}, costs, o);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->unsearched, 0);
  EXPECT_GT(whole->simulated.size(), r.simulated.size());
}

TEST(Tuner, BadSpacesNameTheirFault) {
  static const proto::Cluster cluster = LoadCluster("local").value();
  const CostContext costs(cluster, CostTable());
  TuneOptions o;
  EXPECT_EQ(Tune(Tiny(), {}, costs, o).status().message(), "devices must be 1..1048576, got 0");
  o.space.devices = 2;
  o.space.schedules = {"1F1B", "2F2B"};
  const std::string message = Tune(Tiny(), {}, costs, o).status().message();
  EXPECT_EQ(message.rfind("unknown schedule '2F2B'", 0), 0u) << message;
}

// The command: a table of plans best first, what each rule pruned, the
// winner's plan saved and run as it is; one-line errors.
// --list_candidates prints the space in the order the search takes it,
// cheapest time bound first, and simulates nothing.
TEST(Tuner, ListCandidatesPrintsTheSearchOrderWithoutSimulating) {
  const CliResult list = Loom("tune --preset gpt-tiny --devices 2 --list_candidates");
  ASSERT_EQ(list.code, 0) << list.out;
  int let_through = -1;
  ASSERT_EQ(std::sscanf(list.out.c_str(), "%*d candidates considered, %d let through",
                        &let_through), 1)
      << list.out;
  EXPECT_EQ(list.out.find("step ms"), std::string::npos) << list.out;
  const size_t header = list.out.find("bound ms");
  ASSERT_NE(header, std::string::npos) << list.out;
  std::istringstream rows(list.out.substr(list.out.find('\n', header) + 1));
  std::string row;
  int n = 0;
  double previous = 0;
  while (std::getline(rows, row)) {
    double bound_ms = 0, bound_mb = 0;
    ASSERT_EQ(std::sscanf(row.c_str(), "%lf %lf", &bound_ms, &bound_mb), 2) << row;
    EXPECT_GE(bound_ms, previous) << row;
    EXPECT_GT(bound_mb, 0) << row;
    EXPECT_NE(row.find(" dp"), std::string::npos) << row;
    previous = bound_ms;
    ++n;
  }
  EXPECT_GT(n, 20);
  EXPECT_EQ(n, let_through);
}

TEST(Tuner, CommandPrintsSavesAndRunsTheWinner) {
  const std::string dir = MakeTempDir("tune");
  const CliResult tune = Loom("tune --preset gpt-tiny --devices 2 --top 3 --explain -o " + dir +
                              "/plan.pb");
  ASSERT_EQ(tune.code, 0) << tune.out;
  EXPECT_NE(tune.out.find("tune: gpt-tiny on 2 devices of cluster local: "), std::string::npos)
      << tune.out;
  EXPECT_NE(tune.out.find("\n  1  dp"), std::string::npos) << tune.out;
  EXPECT_NE(tune.out.find("pruned "), std::string::npos) << tune.out;
  EXPECT_NE(tune.out.find("\nwinner dp"), std::string::npos) << tune.out;
  EXPECT_NE(tune.out.find("  layout dp"), std::string::npos) << tune.out;
  const CliResult run = Loom("run --plan " + dir + "/plan.pb --steps 2");
  ASSERT_EQ(run.code, 0) << run.out;
  EXPECT_NE(run.out.find("step 1 loss "), std::string::npos) << run.out;

  const CliResult none = Loom("tune --preset gpt-tiny");
  EXPECT_NE(none.code, 0);
  EXPECT_EQ(Lines(none.out), 1) << none.out;
  EXPECT_NE(none.out.find("--devices must be at least 1, got 0"), std::string::npos) << none.out;
  const CliResult schedule = Loom("tune --preset gpt-tiny --devices 2 --schedules 1F1B,2F2B");
  EXPECT_NE(schedule.code, 0);
  EXPECT_EQ(Lines(schedule.out), 1) << schedule.out;
  EXPECT_NE(schedule.out.find("unknown schedule '2F2B'"), std::string::npos) << schedule.out;
  const CliResult limit = Loom("tune --preset gpt-tiny --devices 2 --search_seconds -1");
  EXPECT_NE(limit.code, 0);
  EXPECT_EQ(Lines(limit.out), 1) << limit.out;
  EXPECT_NE(limit.out.find("--search_seconds must be 0 (no limit) or a positive number of "
                           "seconds, got -1"),
            std::string::npos)
      << limit.out;
  const CliResult stopped = Loom("tune --preset gpt-tiny --devices 2 --search_seconds 1e-9");
  ASSERT_EQ(stopped.code, 0) << stopped.out;
  EXPECT_NE(stopped.out.find("stopped at --search_seconds: "), std::string::npos) << stopped.out;
  EXPECT_NE(stopped.out.find("\n  1  dp"), std::string::npos) << stopped.out;
}

}  // namespace
}  // namespace loom
