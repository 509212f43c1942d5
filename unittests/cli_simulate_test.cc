// loom simulate: the step it prints, its memory verdicts and its errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "scheduler/trace.h"
#include "unittests/loom_cli.h"

namespace {

using loom::FieldAfter;
using loom::Lines;
using loom::Loom;
using Result = loom::CliResult;

// The count column of the first `--compare` row named `key`: its measured
// count, or the simulated one where the two differ ("measured/simulated");
// -1 where there is no such row.
int CountColumn(const std::string& out, const std::string& key, bool simulated = false) {
  const size_t at = out.find("\n  " + key + " ");
  if (at == std::string::npos) return -1;
  const char* p = out.c_str() + at + 3 + key.size();
  char* end = nullptr;
  const long measured = std::strtol(p, &end, 10);
  if (simulated && *end == '/') return static_cast<int>(std::strtol(end + 1, nullptr, 10));
  return static_cast<int>(measured);
}

// A launch's ranks each write their trace (--trace NAME: NAME.rankR.json);
// simulate --compare takes NAME for all of them, and names a file that
// is missing.
TEST(Cli, SimulateComparesWithALaunchedRunByItsTraceName) {
  const std::string dir = ::testing::TempDir() + "/loom_cli_compare";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string model = " --preset gpt-tiny --layers 2 --mp 2 --pp 2 --micro_batches 2 "
                            "--schedule 1F1B";
  Result run = Loom("launch --nproc 4 -- " + std::string(LOOM_BIN) + " run" + model +
                    " --steps 2 --trace " + dir + "/t.json");
  ASSERT_EQ(run.code, 0) << run.out;
  ASSERT_TRUE(std::filesystem::exists(dir + "/t.json.rank3.json"));
  Result c = Loom("simulate" + model + " --cost_table " + dir + "/table.pbtxt --compare " + dir +
                  "/t.json");
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_NE(c.out.find("step: measured "), std::string::npos) << c.out;
  // Every rank's instructions are there, rank 3's too: a stream's row
  // prints one count where the measured events match the simulated ones in
  // number, "measured/simulated" where a rank's trace is missing.
  EXPECT_EQ(CountColumn(c.out, "calc"), CountColumn(c.out, "calc", /*simulated=*/true)) << c.out;
  EXPECT_GT(CountColumn(c.out, "calc"), 0) << c.out;
  EXPECT_EQ(CountColumn(c.out, "mp"), CountColumn(c.out, "mp", /*simulated=*/true)) << c.out;
  Result missing = Loom("simulate" + model + " --compare " + dir + "/nothing.json");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find(dir + "/nothing.json"), std::string::npos) << missing.out;
}

TEST(Cli, SimulateReportsTheStepFromTheProfiledTable) {
  const std::string table = "/tmp/loom_cli_sim_table.pbtxt";
  std::remove(table.c_str());
  // The serial layout's ops are exactly the profiled program's: every one
  // is priced from the table.
  Result profile = Loom("profile --preset gpt-tiny --cost_table " + table);
  ASSERT_EQ(profile.code, 0) << profile.out;
  Result serial = Loom("simulate --preset gpt-tiny --cost_table " + table);
  ASSERT_EQ(serial.code, 0) << serial.out;
  EXPECT_NE(serial.out.find(" profiled, 0 scaled, 0 roofline)"), std::string::npos) << serial.out;
  EXPECT_GT(FieldAfter(serial.out, "step time"), 0) << serial.out;

  const std::string layout = "--preset gpt-tiny --mp 2 --pp 2 --micro_batches 4 --schedule 1F1B";
  Result json = Loom("simulate " + layout + " --json --cost_table " + table);
  ASSERT_EQ(json.code, 0) << json.out;
  auto doc = nlohmann::json::parse(json.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << json.out;
  EXPECT_GT(doc["step_time_s"].get<double>(), 0);
  EXPECT_GE(doc["bubble_fraction"].get<double>(), 0);
  EXPECT_LT(doc["bubble_fraction"].get<double>(), 1);
  for (const char* kind : {"mp", "dp", "p2p", "sharding"}) {
    EXPECT_TRUE(doc["exposed_comm_s"].contains(kind)) << kind;
  }
  EXPECT_GT(doc["exposed_comm_s"]["mp"].get<double>(), 0);
  // No data parallelism, but the tied embedding's gradient is all-reduced
  // between the first and last stage once per step, on the dp stream
  // (whether compute hides it depends on the profiled times).
  EXPECT_GT(doc["ranks"][0]["busy_s"]["dp"].get<double>(), 0);
  EXPECT_EQ(doc["exposed_comm_s"]["sharding"].get<double>(), 0);
  ASSERT_EQ(doc["peak_memory_bytes"].size(), 4u);
  ASSERT_EQ(doc["ranks"].size(), 4u);
  EXPECT_EQ(doc["ranks"][3]["coords"]["pp"].get<int>(), 1);

  // A saved plan of the same layout (every rank planned, not one per stage)
  // simulates to the same step: tensor-parallel ranks time alike.
  const std::string plan = "/tmp/loom_cli_sim.plan";
  ASSERT_EQ(Loom("plan " + layout + " -o " + plan).code, 0);
  Result saved = Loom("simulate --plan " + plan + " --json --cost_table " + table);
  ASSERT_EQ(saved.code, 0) << saved.out;
  auto saved_doc = nlohmann::json::parse(saved.out, nullptr, false);
  ASSERT_FALSE(saved_doc.is_discarded()) << saved.out;
  EXPECT_DOUBLE_EQ(saved_doc["step_time_s"].get<double>(), doc["step_time_s"].get<double>());

  // The trace reads back, one event per instruction of every rank.
  const std::string trace = "/tmp/loom_cli_sim_trace.json";
  std::remove(trace.c_str());
  ASSERT_EQ(Loom("simulate " + layout + " --cost_table " + table + " --trace " + trace).code, 0);
  auto events = loom::ReadChromeTrace(trace);
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_GT(events->size(), 400u);
}

// --against simulates the layout under a second schedule and reports both:
// 1F1B-overlap hides tensor-parallel all-reduces that 1F1B leaves exposed.
TEST(Cli, SimulateAgainstAnotherSchedule) {
  // A table that does not exist: every op by roofline, the same anywhere.
  const std::string none = "/tmp/loom_cli_against_no_table.pbtxt";
  std::remove(none.c_str());
  const std::string layout =
      "simulate --preset gpt-small --layers 2 --batch_size 4 --seq_len 32 --mp 2 "
      "--micro_batches 4 --cluster emulated --schedule 1F1B-overlap --against 1F1B "
      "--cost_table " + none;
  Result r = Loom(layout);
  ASSERT_EQ(r.code, 0) << r.out;
  const size_t against = r.out.find("\nagainst 1F1B:\n");
  ASSERT_NE(against, std::string::npos) << r.out;
  const std::string tail = r.out.substr(against);
  EXPECT_NE(tail.find("  step time"), std::string::npos) << tail;
  EXPECT_NE(tail.find("  peak memory"), std::string::npos) << tail;
  // "exposed mp  BASE -> OURS ms (P% of 1F1B's; ...)": less than all of it.
  const size_t mp = tail.find("exposed mp");
  ASSERT_NE(mp, std::string::npos) << tail;
  const size_t of = tail.find("% of 1F1B's", mp);
  ASSERT_NE(of, std::string::npos) << tail;
  const size_t open = tail.rfind('(', of);
  const double percent = std::stod(tail.substr(open + 1, of - open - 1));
  EXPECT_LT(percent, 70) << tail;  // 55% when written
  EXPECT_GT(percent, 0) << tail;
  Result json = Loom(layout + " --json");
  ASSERT_EQ(json.code, 0) << json.out;
  EXPECT_NE(json.out.find("\"against\":{\"result\":"), std::string::npos) << json.out.substr(0, 300);
  Result bad = Loom("simulate --preset gpt-tiny --schedule 1F1B --against 1F1B-overlap");
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(Lines(bad.out), 1) << bad.out;
  EXPECT_NE(bad.out.find("--against: pipeline.schedule_mode 1F1B-overlap"), std::string::npos)
      << bad.out;
}

// --memory_limit: 1F1B-overlap gives up overlap (fewer micro-batches in
// flight, or no interleaving: 1F1B) until every rank's simulated peak fits,
// takes the fastest that does, and says so; a limit nothing fits is a
// one-line error.
TEST(Cli, SimulateKeepsUnderTheMemoryLimit) {
  const std::string layout =
      "simulate --preset gpt3-6.7b --recipe none --mp 2 --pp 4 --micro_batches 8 "
      "--schedule 1F1B-overlap --cluster h100 --recompute none ";
  Result free = Loom(layout + "--json");
  ASSERT_EQ(free.code, 0) << free.out;
  Result capped = Loom(layout + "--memory_limit 3500000000000");
  ASSERT_EQ(capped.code, 0) << capped.out;
  // At 6 in flight the warm-up's bubble costs more than the overlap saves:
  // 1F1B, which fits, is faster.
  EXPECT_NE(capped.out.find("1F1B fits (peak "), std::string::npos) << capped.out;
  EXPECT_NE(capped.out.find(", faster than 1F1B-overlap at 6 micro-batches in flight"),
            std::string::npos)
      << capped.out;
  EXPECT_NE(capped.out.find("giving up the interleaving for memory"), std::string::npos)
      << capped.out;
  const double peak_mb = FieldAfter(capped.out, "peak memory    ");
  EXPECT_GT(peak_mb, 0) << capped.out;
  EXPECT_LE(peak_mb, 3.5e6) << capped.out;
  Result none = Loom(layout + "--memory_limit 1000000000");
  EXPECT_EQ(none.code, 1);
  EXPECT_EQ(Lines(none.out), 1) << none.out;
  EXPECT_NE(none.out.find("above the memory limit of 1000 MB"), std::string::npos) << none.out;
  Result other = Loom("simulate --preset gpt-tiny --pp 2 --micro_batches 2 --max_in_flight 3");
  EXPECT_EQ(other.code, 1);
  EXPECT_NE(other.out.find("pipeline.max_in_flight is 3 but pipeline.schedule_mode 1F1B does "
                           "not take it"),
            std::string::npos)
      << other.out;
}

// A simulation on a GPU cluster says whether each rank's peak fits the
// device (80 GiB on h100) and names the ranks that do not, largest first;
// the JSON marks each rank. A CPU cluster's ranks share the host: no line.
TEST(Cli, SimulateSaysWhetherEachRankFitsTheDevice) {
  Result over = Loom("simulate --preset gpt3-6.7b --recipe none --mp 2 --pp 4 --micro_batches 8 "
                     "--schedule 1F1B --cluster h100");
  ASSERT_EQ(over.code, 0) << over.out;
  EXPECT_NE(over.out.find("device memory  8 of 8 ranks do not fit 85.9 GB: rank 0 needs 2538.1 GB "
                          "of 85.9 GB: activations 2444.0 GB (8 layers, 0 recomputed), "
                          "gradients 83.1 GB, optimizer state 7.3 GB, parameters 3.7 GB; rank 1 "
                          "needs"),
            std::string::npos)
      << over.out;
  EXPECT_NE(over.out.find("; and 5 more\n"), std::string::npos) << over.out;
  // The GPT-3 recipe (bf16 O2, micro-batches of one sequence) fits.
  Result fits = Loom("simulate --preset gpt3-6.7b --layers 8 --batch_size 8 --mp 2 --pp 4 "
                     "--cluster h100");
  ASSERT_EQ(fits.code, 0) << fits.out;
  EXPECT_NE(fits.out.find("device memory  every rank fits 85.9 GB (largest peak 8.3 GB, rank 0)"),
            std::string::npos)
      << fits.out;
  Result json = Loom("simulate --preset gpt3-6.7b --recipe none --layers 8 --mp 2 --pp 4 "
                     "--micro_batches 8 --schedule 1F1B --cluster h100 --json");
  ASSERT_EQ(json.code, 0) << json.out;
  const nlohmann::json j = nlohmann::json::parse(json.out.substr(json.out.find('{')));
  EXPECT_EQ(j["device_memory_bytes"], int64_t{85899345920});
  int over_device = 0;
  for (const auto& rank : j["ranks"]) {
    const bool fits_device = rank["fits_device"];
    EXPECT_EQ(fits_device, rank["memory_bytes"]["peak"].get<int64_t>() <= 85899345920) << rank;
    over_device += !fits_device;
  }
  EXPECT_EQ(over_device, 8);
  Result cpu = Loom("simulate --preset gpt-tiny --mp 2");
  ASSERT_EQ(cpu.code, 0) << cpu.out;
  EXPECT_EQ(cpu.out.find("device memory"), std::string::npos) << cpu.out;
}

TEST(Cli, SimulateErrorsAreOneLine) {
  Result cluster = Loom("simulate --cluster nosuch");
  EXPECT_EQ(cluster.code, 1);
  EXPECT_EQ(Lines(cluster.out), 1) << cluster.out;
  EXPECT_NE(cluster.out.find("nosuch"), std::string::npos) << cluster.out;
  const std::string plan = "/tmp/loom_cli_sim_fixed.plan";
  ASSERT_EQ(Loom("plan --preset gpt-tiny --pp 2 --micro_batches 2 -o " + plan).code, 0);
  Result mixed = Loom("simulate --plan " + plan + " --dp 2");
  EXPECT_EQ(mixed.code, 1);
  EXPECT_EQ(mixed.out,
            "loom simulate: --dp cannot be combined with --plan: the plan fixes it\n");
}

}  // namespace
