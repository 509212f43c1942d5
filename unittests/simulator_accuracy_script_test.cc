// scripts/simulator_accuracy.sh on two small rows, as a user runs it: it
// measures the rows in passes, keeps the runs, and --resimulate writes the
// same rows again from them without running anything.

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "executor/cpu/host_threads.h"
#include "unittests/loom_cli.h"

namespace loom {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The table row of `layout` in the page at `path` (empty if none).
std::string RowOf(const std::string& page, const std::string& layout) {
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);) {
    if (line.find("| `" + layout + "` |") != std::string::npos) return line;
  }
  return "";
}

TEST(SimulatorAccuracyScript, KeptRunsSimulateAgainToTheSameRow) {
  if (CoresOfThisProcess().size() < 2) {
    GTEST_SKIP() << "the loopback run times its core wait on 2 pinned ranks; this process may "
                    "use fewer than 2 cores";
  }
  const std::string dir = MakeTempDir("loom_accuracy_script");
  // Two rows, two runs of 3 steps each, on the preset cluster (no link
  // measurement), with no wait for a quiet host and no retries: CI runs
  // tests side by side.
  const std::string script = "LOOM=" + std::string(LOOM_BIN) + " scripts/simulator_accuracy.sh";
  const std::string small =
      " --networks loopback --only 'gpt-tiny.*\\|--(dp|mp) 2$' --steps 3 --repeats 2"
      " --max_repeats 2 --quiet_wait 0 --retries 0 --noise_seconds 0 --out ";
  CliResult measured = Shell(script + small + dir + "/measured.md --cluster "
                             "configs/clusters/local.pbtxt --keep " + dir + "/keep");
  ASSERT_EQ(measured.code, 0) << measured.out;
  const std::string row = RowOf(Read(dir + "/measured.md"), "--dp 2");
  ASSERT_NE(row, "") << Read(dir + "/measured.md");
  EXPECT_EQ(row.rfind("| gpt-tiny | ", 0), 0u) << row;
  EXPECT_NE(row.find(" | loopback | "), std::string::npos) << row;
  const std::string mp_row = RowOf(Read(dir + "/measured.md"), "--mp 2");
  ASSERT_NE(mp_row, "") << Read(dir + "/measured.md");
  // A pass runs each row once: the kept runs alternate between the rows.
  std::istringstream runs(Read(dir + "/keep/runs"));
  std::string layouts;
  for (std::string line; std::getline(runs, line);) {
    layouts += line.find("|--dp 2|") != std::string::npos ? "dp " : "mp ";
  }
  EXPECT_EQ(layouts, "dp mp dp mp ") << Read(dir + "/keep/runs");

  CliResult again = Shell(script + " --resimulate " + dir + "/keep --networks loopback --out " +
                          dir + "/again.md");
  ASSERT_EQ(again.code, 0) << again.out;
  const std::string page = Read(dir + "/again.md");
  EXPECT_NE(page.find("simulated again (`--resimulate`)"), std::string::npos) << page;
  // The same binary and the same kept runs: the same row, to the digit.
  EXPECT_EQ(RowOf(page, "--dp 2"), row) << page;
  EXPECT_EQ(RowOf(page, "--mp 2"), mp_row) << page;

  CliResult missing = Shell(script + " --resimulate " + dir + " --out " + dir + "/x.md");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find("--resimulate " + dir + ": no runs there"), std::string::npos)
      << missing.out;
}

}  // namespace
}  // namespace loom
