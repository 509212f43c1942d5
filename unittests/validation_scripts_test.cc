// The scripts that write the docs' validation tables, run as a user runs
// them, on their smallest rows.

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

// The cells of a markdown table row, trimmed.
std::vector<std::string> Cells(const std::string& row) {
  std::vector<std::string> cells;
  std::istringstream in(row);
  std::string cell;
  std::getline(in, cell, '|');  // before the first bar
  while (std::getline(in, cell, '|')) {
    const size_t b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
    cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
  }
  if (!cells.empty() && cells.back().empty()) cells.pop_back();  // after the last bar
  return cells;
}

// The last line of `text` that starts with `prefix` (empty if none).
std::string LastLineStartingWith(const std::string& text, const std::string& prefix) {
  std::string found;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) found = line;
  }
  return found;
}

// scripts/simulator_accuracy.sh on two small rows: it measures the rows in
// passes, keeps the runs, and --resimulate writes the same rows again from
// them without running anything.
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
  // The measured cell is the runs' step time (a gpt-tiny step of 64
  // sequences takes tens of ms here), not another field of the step line:
  // the script once read the learning rate, 0.003, once the line grew it.
  const std::vector<std::string> cells = Cells(row);
  ASSERT_GE(cells.size(), 6u) << row;
  EXPECT_GT(std::stod(cells[4]), 1.0) << row;
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

  // --profile_once: the ops of both rows profiled once, before any run, into
  // one table that prices every run; the runs themselves are plain.
  CliResult once = Shell(script + small + dir + "/once.md --cluster configs/clusters/local.pbtxt "
                         "--keep " + dir + "/once --profile_once");
  ASSERT_EQ(once.code, 0) << once.out;
  EXPECT_NE(once.out.find("profiled the ops of 2 plans once"), std::string::npos) << once.out;
  const std::string once_page = Read(dir + "/once.md");
  EXPECT_NE(once_page.find("scripts/simulator_accuracy.sh --profile_once: generated from here"),
            std::string::npos) << once_page;
  EXPECT_NE(once_page.find("profiled on this host once, before any run"), std::string::npos)
      << once_page;
  const std::string once_row = RowOf(once_page, "--mp 2");
  ASSERT_NE(once_row, "") << once_page;
  const std::vector<std::string> once_cells = Cells(once_row);
  ASSERT_GE(once_cells.size(), 6u) << once_row;
  EXPECT_GT(std::stod(once_cells[4]), 1.0) << once_row;
  const std::string first_table = Read(dir + "/once/table.1.pbtxt");
  EXPECT_NE(first_table.find("signature"), std::string::npos) << first_table;
  for (int run = 2; run <= 4; ++run) {
    EXPECT_EQ(Read(dir + "/once/table." + std::to_string(run) + ".pbtxt"), first_table) << run;
  }

  CliResult missing = Shell(script + " --resimulate " + dir + " --out " + dir + "/x.md");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find("--resimulate " + dir + ": no runs there"), std::string::npos)
      << missing.out;
}


// scripts/megatron_table5.sh on its smallest model (22B: two simulations
// of 8 ranks on the a100 preset): the row carries the paper's seconds, and
// its ratios follow from the printed seconds; and docs/megatron_validation.md
// shows the row the script prints today, so that the page's table is not
// stale after a change to the cost model or a preset.
TEST(MegatronTable5Script, PrintsTheDocumentedRowOfTheSmallestModel) {
  const std::string script = "LOOM=" + std::string(LOOM_BIN) + " scripts/megatron_table5.sh";
  CliResult run = Shell(script + " --only 22B");
  ASSERT_EQ(run.code, 0) << run.out;
  const std::string row = LastLineStartingWith(run.out, "| 22B |");
  ASSERT_NE(row, "") << run.out;
  const std::vector<std::string> c = Cells(row);
  ASSERT_EQ(c.size(), 12u) << row;
  EXPECT_EQ(c[1], "mp8 pp1 mb1");
  EXPECT_EQ(c[3], "1.42");  // the paper's full recomputation
  EXPECT_EQ(c[6], "1.10");  // and SP + selective
  const double full = std::stod(c[2]), sp = std::stod(c[5]);
  EXPECT_GT(full, sp) << "full recomputation runs each forward twice";
  // The ratios come from unrounded seconds; the printed seconds are
  // rounded to 0.005, which bounds how far the two can differ.
  EXPECT_NEAR(std::stod(c[4]), full / 1.42, 0.006) << row;
  EXPECT_NEAR(std::stod(c[7]), sp / 1.10, 0.006) << row;
  EXPECT_NEAR(std::stod(c[8]), full / sp, 0.006 * (1 + full / sp) / sp) << row;
  EXPECT_EQ(c[11].find("(no)"), std::string::npos) << "22B fits an 80 GB A100: " << row;
  EXPECT_NE(Read("docs/megatron_validation.md").find(row + "\n"), std::string::npos)
      << "docs/megatron_validation.md does not show today's row (rerun "
         "scripts/megatron_table5.sh): "
      << row;

  CliResult bad = Shell(script + " --rows 2");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("megatron_table5.sh: unknown argument '--rows'"), std::string::npos)
      << bad.out;
}

// scripts/megatron_table4.py on its last setting (SP + selective: four
// simulations of the 22B's 8 ranks): the row carries the paper's
// milliseconds, its combined time is its forward and backward, and
// docs/megatron_validation.md shows the row the script prints today.
TEST(MegatronTable4Script, PrintsTheDocumentedLayerTimes) {
  const std::string script = "LOOM=" + std::string(LOOM_BIN) + " scripts/megatron_table4.py";
  CliResult run = Shell(script + " --only 'SP \\+ selective'");
  ASSERT_EQ(run.code, 0) << run.out;
  const std::string row = LastLineStartingWith(run.out, "| SP + selective |");
  ASSERT_NE(row, "") << run.out;
  const std::vector<std::string> c = Cells(row);
  ASSERT_EQ(c.size(), 8u) << row;
  EXPECT_EQ(c[2], "7.2");   // the paper's forward
  EXPECT_EQ(c[4], "13.1");  // and backward
  const double fwd = std::stod(c[1]), bwd = std::stod(c[3]);
  EXPECT_GT(bwd, fwd) << "a layer's backward does twice its forward's GEMM work: " << row;
  // The combined time and the ratio come from unrounded times; the printed
  // ones are rounded to 0.005 ms, which bounds how far the two can differ.
  EXPECT_NEAR(std::stod(c[5]), fwd + bwd, 0.016) << row;
  EXPECT_NEAR(std::stod(c[7]), (fwd + bwd) / 20.3, 0.0015) << row;
  EXPECT_NE(Read("docs/megatron_validation.md").find(row + "\n"), std::string::npos)
      << "docs/megatron_validation.md does not show today's row (rerun "
         "scripts/megatron_table4.py): "
      << row;

  CliResult bad = Shell(script + " --rows 2");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("unrecognized arguments: --rows"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace loom
