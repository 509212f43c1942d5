// loom run and loom launch: ranks in one process and in many, and a rank that fails.
#include <chrono>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "unittests/loom_cli.h"

namespace {

using loom::Loom;
using loom::LossLines;
using loom::ReadWholeFile;
using Result = loom::CliResult;

TEST(Cli, RunMatchesTrainAndLaunchMatchesRun) {
  const std::string args =
      "--preset gpt-tiny --mp 2 --pp 2 --micro_batches 2 --schedule 1F1B --steps 3";
  Result train = Loom("train --preset gpt-tiny --steps 3");
  Result run = Loom("run " + args + " --trace /tmp/loom_cli_trace.json");
  Result launch = Loom("launch --nproc 4 -- " + std::string(LOOM_BIN) + " run " + args);
  ASSERT_EQ(run.code, 0) << run.out;
  ASSERT_EQ(launch.code, 0) << launch.out;
  const auto run_losses = LossLines(run.out);
  ASSERT_EQ(run_losses.size(), 3u) << run.out;
  // Four processes print exactly what one process with four ranks prints.
  EXPECT_EQ(LossLines(launch.out), run_losses) << launch.out;
  // Step 0 (same initialization, no update yet) agrees with serial training
  // to the printed digit.
  EXPECT_EQ(LossLines(train.out)[0], run_losses[0]);
  const std::string trace = ReadWholeFile("/tmp/loom_cli_trace.json");
  EXPECT_EQ(trace.rfind("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", 0), 0u);
  EXPECT_NE(trace.find("\"args\":{\"name\":\"rank 3\"}"), std::string::npos);
  EXPECT_NE(trace.find("\"args\":{\"name\":\"p2p_send\"}"), std::string::npos);
  // Each rank's temporaries, as a counter track, and where they peaked.
  EXPECT_NE(run.out.find("traced step's peak of temporaries: rank 3 "), std::string::npos)
      << run.out;
  EXPECT_NE(trace.find("\"name\":\"temporaries (MB)\",\"ph\":\"C\",\"pid\":3"), std::string::npos);
}

// The run ends with its step time: the median and spread of the steps
// after the first two, once under a launch as in one process; too few
// steps, no line.
TEST(Cli, RunSumsUpItsStepTimesAfterTheFirstTwo) {
  const std::string args = "--preset gpt-tiny --layers 2 --mp 2 --steps 6";
  const Result run = Loom("run " + args);
  const Result launch = Loom("launch --nproc 2 -- " + std::string(LOOM_BIN) + " run " + args);
  for (const Result* r : {&run, &launch}) {
    ASSERT_EQ(r->code, 0) << r->out;
    const size_t at = r->out.find("steps 2-5: median step time ");
    ASSERT_NE(at, std::string::npos) << r->out;
    const std::string line = r->out.substr(at, r->out.find('\n', at) - at);
    EXPECT_EQ(r->out.find("median step time", at + line.size()), std::string::npos)
        << "printed twice";
    double median = 0, cv = 0;
    ASSERT_EQ(std::sscanf(line.c_str(),
                          "steps 2-5: median step time %lf ms, coefficient of variation %lf%%",
                          &median, &cv),
              2)
        << line;
    EXPECT_GT(median, 0) << line;
    EXPECT_GE(cv, 0) << line;
  }
  const Result short_run = Loom("run --preset gpt-tiny --layers 2 --mp 2 --steps 4");
  ASSERT_EQ(short_run.code, 0) << short_run.out;
  EXPECT_EQ(short_run.out.find("median step time"), std::string::npos) << short_run.out;
}

TEST(Cli, LaunchNamesTheRankThatFails) {
  Result r = Loom("launch --nproc 2 -- " + std::string(LOOM_BIN) +
                  " run --preset gpt-tiny --dp 3 --steps 1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("loom launch: rank "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exited with status 1; stopping the other ranks"), std::string::npos)
      << r.out;
}

TEST(Cli, LaunchStopsEveryoneWhenARankIsKilled) {
  const auto start = std::chrono::steady_clock::now();
  Result r = Loom("launch --nproc 3 -- sh -c "
                  "'if [ $LOOM_RANK = 1 ]; then kill -9 $$; else sleep 30; fi'");
  const double seconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("loom launch: rank 1 was killed by signal 9; stopping the other ranks"),
            std::string::npos) << r.out;
  EXPECT_LT(seconds, 10.0);  // the sleeping ranks were stopped, not waited for
}

}  // namespace
