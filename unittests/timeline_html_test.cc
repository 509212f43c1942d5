// The HTML timeline in a real browser: headless Chromium loads the page
// written for a simulated 4-rank step, and the page reports what it drew.
#include "scheduler/timeline_html.h"

#include <sys/stat.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "models/gpt.h"
#include "passes/planner.h"
#include "scheduler/simulator.h"
#include "unittests/test_plan_options.h"

namespace loom {
namespace {

class FixedTimer : public InstructionTimer {
 public:
  double Seconds(const RankGraph&, const Instruction& ins) const override {
    return ins.communicates() ? 40e-6 : 25e-6;
  }
};

std::string Chromium() {
  for (const char* path : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

std::string RunCommand(const std::string& command) {
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (pipe == nullptr) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe.get())) > 0) out.append(buf.data(), n);
  return out;
}

std::string Attribute(const std::string& dom, const std::string& name) {
  const std::string key = name + "=\"";
  const size_t at = dom.find(key);
  if (at == std::string::npos) return "";
  const size_t end = dom.find('"', at + key.size());
  return dom.substr(at + key.size(), end - at - key.size());
}

TEST(TimelineHtml, RendersInHeadlessChromium) {
  const std::string chromium = Chromium();
  if (chromium.empty()) {
    GTEST_SKIP() << "SKIPPED LOUDLY: chromium is not installed (scripts/setup.sh installs it); "
                    "the timeline page was not checked in a browser";
  }
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 4;
  TrainingProgram tp = BuildGptTrainingProgram(c).value();
  Plan plan =
      PlanRanks(tp.main, tp.startup, MakeStrategy(1, 2, 2, 4, "1F1B"), {}, LocalPlanOptions())
          .value();
  ExecutionGraph graph = LowerPlan(plan).value();
  FixedTimer timer;
  SimulationOptions o;
  o.timer = &timer;
  o.trace = true;
  SimulationResult sim = Simulate(graph, o).value();
  std::set<std::pair<int, std::string>> rows;
  for (const TraceEvent& e : sim.trace) rows.emplace(e.rank, e.stream);

  const std::string dir = testing::TempDir() + "/timeline_html_test";
  std::filesystem::create_directories(dir);
  const std::string page = dir + "/timeline.html";
  // Two panels, as `loom demo` shows a measured and a simulated step; a
  // title with markup must come out escaped.
  ASSERT_TRUE(WriteTimelineHtml(page, "1F1B <mp=2 pp=2>",
                                {{"simulated", "step", sim.trace}, {"again", "", sim.trace}})
                  .ok());
  const std::string flags = " --headless --no-sandbox --disable-gpu --hide-scrollbars"
                            " --window-size=1400,900 ";
  const std::string dom =
      RunCommand("timeout 120 " + chromium + flags + "--dump-dom file://" + page + " 2>/dev/null");
  ASSERT_FALSE(dom.empty()) << "chromium printed no DOM";
  EXPECT_EQ(Attribute(dom, "data-errors"), "") << "script errors";
  EXPECT_EQ(Attribute(dom, "data-rendered"), "ok");
  EXPECT_EQ(Attribute(dom, "data-rows"), std::to_string(2 * rows.size()));
  EXPECT_GT(std::atol(Attribute(dom, "data-painted").c_str()), 2000);
  EXPECT_NE(dom.find("1F1B &lt;mp=2 pp=2&gt;"), std::string::npos);

  const std::string png = dir + "/timeline.png";
  std::remove(png.c_str());
  RunCommand("timeout 120 " + chromium + flags + "--screenshot=" + png + " file://" + page +
      " 2>/dev/null");
  struct stat st;
  ASSERT_EQ(stat(png.c_str(), &st), 0) << "no screenshot at " << png;
  // A blank 1400x900 PNG compresses to a few KB; drawn rows do not.
  EXPECT_GT(st.st_size, 20000) << png;
  std::cout << "[ screenshot ] " << png << " (" << st.st_size << " bytes)\n";
}

}  // namespace
}  // namespace loom
