// `loom tune --json`: the report as one document, whose plans each carry a
// strategy that reproduces them (scripts/tuner_accuracy.py runs them).

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cost_model/cost_table.h"
#include "framework/status.h"
#include "unittests/loom_cli.h"

namespace loom {
namespace {

const std::string kModel = " --preset gpt-tiny --layers 2 --batch_size 8 --seq_len 32";

TEST(TuneJson, EveryPlanCarriesTheStrategyThatReproducesIt) {
  const std::string dir = MakeTempDir("loom_tune_json");
  // A limit some plans exceed, so that both verdicts appear.
  const int64_t limit = 1'500'000;
  // stderr holds the progress lines; stdout the document alone.
  const std::string out = dir + "/tune.json";
  CliResult tune = Shell("(" + std::string(LOOM_BIN) + " tune" + kModel +
                         " --devices 2 --exhaustive --json --memory_limit " +
                         std::to_string(limit) + " > " + out + ")");
  ASSERT_EQ(tune.code, 0) << tune.out;
  const auto doc = nlohmann::json::parse(ReadWholeFile(out), nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << ReadWholeFile(out);
  EXPECT_EQ(doc["devices"], 2);
  EXPECT_EQ(doc["memory_limit_bytes"], limit);
  const auto& plans = doc["simulated"];
  ASSERT_GT(plans.size(), 20u);

  // The verdicts follow the limit, and the first of `top` is the fastest
  // plan that fits.
  int fit = 0;
  int over = 0;
  double fastest = 1e9;
  std::string fastest_name;
  for (const auto& p : plans) {
    const int64_t peak = p["peak_bytes"];
    if (p["fits"]) {
      ++fit;
      EXPECT_LE(peak, limit) << p["name"];
      if (p["step_time_s"].get<double>() < fastest) {
        fastest = p["step_time_s"];
        fastest_name = p["name"];
      }
    } else {
      ++over;
      EXPECT_GT(peak, limit) << p["name"];
    }
  }
  EXPECT_GT(fit, 0);
  EXPECT_GT(over, 0);
  EXPECT_EQ(doc["over_memory"], over);
  ASSERT_FALSE(doc["top"].empty());
  EXPECT_EQ(doc["top"][0], fastest_name);

  // The winner's strategy and a pipelined plan's, each simulated on its
  // own: the same step time and peak.
  std::vector<const nlohmann::json*> picked;
  for (const auto& p : plans) {
    if (p["name"] == fastest_name) picked.insert(picked.begin(), &p);
  }
  for (const auto& p : plans) {
    const std::string name = p["name"];
    if (name != fastest_name && name.find(" pp2 ") != std::string::npos) {
      picked.push_back(&p);
      break;
    }
  }
  ASSERT_EQ(picked.size(), 2u);
  for (size_t i = 0; i < picked.size(); ++i) {
    const nlohmann::json& p = *picked[i];
    const std::string name = p["name"];
    const std::string config = dir + "/" + std::to_string(i) + ".pbtxt";
    WriteWholeFile(config, p["strategy"]);
    CliResult sim = Loom("simulate" + kModel + " --config " + config + " --json");
    ASSERT_EQ(sim.code, 0) << name << ": " << sim.out;
    const auto s = nlohmann::json::parse(sim.out, nullptr, false);
    ASSERT_FALSE(s.is_discarded()) << sim.out;
    EXPECT_NEAR(s["step_time_s"].get<double>(), p["step_time_s"].get<double>(),
                1e-9 * p["step_time_s"].get<double>())
        << name;
    int64_t peak = 0;
    for (const auto& r : s["peak_memory_bytes"]) peak = std::max<int64_t>(peak, r);
    EXPECT_EQ(peak, p["peak_bytes"].get<int64_t>()) << name;
  }
}

TEST(TuneJson, ExplainJoinsTheDocument) {
  const std::string out = MakeTempDir("loom_tune_explain") + "/tune.json";
  CliResult tune =
      Shell("(" + std::string(LOOM_BIN) + " tune" + kModel + " --devices 2 --json --explain > " +
            out + ")");
  ASSERT_EQ(tune.code, 0) << tune.out;
  const auto doc = nlohmann::json::parse(ReadWholeFile(out), nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << ReadWholeFile(out);
  ASSERT_TRUE(doc["explain"].is_array());
  EXPECT_FALSE(doc["explain"].empty());
}

TEST(TuneProfileOps, TimesWhatTheTableLacksOnceThenTunesFromIt) {
  const std::string dir = MakeTempDir("loom_tune_profile");
  const std::string table = dir + "/ops.pbtxt";
  const std::string args = "tune" + kModel + " --devices 2 --cluster local --cost_table " + table +
                           " --profile_ops --profile_samples 1 --profile_warmup 0 --top 1";
  CliResult first = Loom(args);
  ASSERT_EQ(first.code, 0) << first.out;
  EXPECT_NE(first.out.find("are not in " + table), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("entries added to " + table), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("  1  dp"), std::string::npos) << first.out;  // the winner's row
  // Three rounds by default; from the second on, each line says how long
  // the rest will take, from the rounds before.
  const size_t second_round = first.out.find("profile round 2/3, plan 1/");
  ASSERT_NE(second_round, std::string::npos) << first.out;
  EXPECT_EQ(first.out.find(" left)"), first.out.find('\n', second_round) - 6) << first.out;
  EXPECT_LT(first.out.find("profile round 1/3, plan 1/"), second_round);
  StatusOr<CostTable> profiled = CostTable::LoadOrEmpty(table);
  ASSERT_TRUE(profiled.ok()) << profiled.status();
  EXPECT_GT(profiled->size(), 50);
  // A second search finds nothing to time, and leaves the table as it was.
  const std::string before = ReadWholeFile(table);
  CliResult second = Loom(args);
  ASSERT_EQ(second.code, 0) << second.out;
  EXPECT_NE(second.out.find(table + " has every op"), std::string::npos) << second.out;
  EXPECT_EQ(ReadWholeFile(table), before);
}

// Each plan's profile is written as it ends: a run killed while it times
// keeps the plans it finished, and a second run times only the rest.
TEST(TuneProfileOps, AKilledRunKeepsThePlansItFinished) {
  const std::string dir = MakeTempDir("loom_tune_profile_killed");
  const std::string table = dir + "/ops.pbtxt";
  const std::string log = dir + "/first.log";
  const std::string args = "tune" + kModel + " --devices 2 --cluster local --cost_table " + table +
                           " --profile_ops --profile_warmup 0 --schedules 1F1B --search_seconds 1 "
                           "--top 1";
  // Many rounds, so that the run is still timing when it is killed.
  const CliResult started =
      Shell(StrCat(LOOM_BIN, " ", args, " --profile_rounds 100 --profile_samples 100 > ", log,
                   " 2>&1 & echo $!"));
  ASSERT_EQ(started.code, 0) << started.out;
  const pid_t pid = static_cast<pid_t>(std::stol(started.out));
  // Killed as soon as a plan's profile is in the table: planning the
  // candidates takes seconds, longer under a sanitizer.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  while (!std::filesystem::exists(table) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  while (kill(pid, 0) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(std::filesystem::exists(table)) << ReadWholeFile(log);
  const std::string first = ReadWholeFile(log);
  const double plans = FieldAfter(first, "; timing them in ");
  ASSERT_GT(plans, 1) << first;
  StatusOr<CostTable> kept = CostTable::LoadOrEmpty(table);
  ASSERT_TRUE(kept.ok()) << kept.status();  // written whole, never in part
  EXPECT_GT(kept->size(), 0);

  CliResult second = Loom(args + " --profile_samples 1 --profile_rounds 1");
  ASSERT_EQ(second.code, 0) << second.out;
  const double rest = FieldAfter(second.out, "; timing them in ");
  ASSERT_GT(rest, 0) << "the first run finished its first round before it was killed:\n"
                     << first << second.out;
  EXPECT_LT(rest, plans) << second.out;
  StatusOr<CostTable> whole = CostTable::LoadOrEmpty(table);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_GT(whole->size(), kept->size());
}

TEST(TuneProfileOps, RefusesAClusterOfGpusAndTimingFlagsAlone) {
  const std::string dir = MakeTempDir("loom_tune_profile_gpu");
  CliResult r = Loom("tune" + kModel + " --devices 2 --cluster a100 --cost_table " + dir +
                     "/ops.pbtxt --profile_ops");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("describes GPUs"), std::string::npos) << r.out;
  // Timing flags without --profile_ops time nothing: refused by name.
  r = Loom("tune" + kModel + " --devices 2 --profile_rounds 5");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--profile_rounds times ops for --profile_ops"), std::string::npos) << r.out;
  EXPECT_EQ(Lines(r.out), 1) << r.out;
}

}  // namespace
}  // namespace loom
