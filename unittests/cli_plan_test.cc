// loom plan, and plans saved with -o: what each rank runs, and plans refused.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "unittests/loom_cli.h"

namespace {

using loom::Lines;
using loom::Loom;
using loom::LossLines;
using loom::ReadWholeFile;
using loom::WriteWholeFile;
using Result = loom::CliResult;

TEST(Cli, PlanPrintsEveryRanksJobs) {
  Result r = Loom("plan --preset gpt-tiny --dp 2 --mp 2 --pp 2 --micro_batches 4 --schedule 1F1B");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("8 rank(s) planned in"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(", verified"), std::string::npos);
  EXPECT_NE(r.out.find("rank 0 (dp=0 mp=0 pp=0): F0 F1 B0 F2 B1 F3 B2 B3 O"), std::string::npos);
  EXPECT_NE(r.out.find("rank 7 (dp=1 mp=1 pp=1): F0 B0 F1 B1 F2 B2 F3 B3 O"), std::string::npos);
  // --schedule ZBV alone gives the V its two chunks (schedule_zbv.cc's
  // worked example).
  Result v = Loom("plan --preset gpt-tiny --layers 4 --pp 2 --micro_batches 4 --schedule ZBV");
  ASSERT_EQ(v.code, 0) << v.out;
  EXPECT_NE(v.out.find("rank 1 (dp=0 mp=0 pp=1): F0.0 F0.1 F1.0 F1.1 b0.1 w0.1 F2.0 b0.0 w0.0 "
                       "F2.1 b1.1 w1.1 F3.0 b1.0 w1.0 F3.1 b2.1 w2.1 b2.0 b3.1 b3.0 w2.0 w3.1 "
                       "w3.0 O"),
            std::string::npos)
      << v.out;
  // The V balances its layers: stage 0, which holds both the embedding and
  // a head made costly by a large vocabulary, keeps one layer a chunk.
  Result costly = Loom("plan --preset gpt-tiny --layers 8 --vocab_size 20000 --pp 2 "
                       "--micro_batches 4 --schedule ZBV --explain --rank 0");
  ASSERT_EQ(costly.code, 0) << costly.out;
  EXPECT_NE(costly.out.find("virtual stage 0 (stage 0, chunk 0): layers 0-0,"), std::string::npos)
      << costly.out;
  EXPECT_NE(costly.out.find("virtual stage 3 (stage 0, chunk 1): layers 7-7,"), std::string::npos)
      << costly.out;
}

TEST(Cli, PlanJsonAndConfigFile) {
  Result r = Loom("plan --preset gpt-tiny --config configs/gpt-tiny-2x2x2-1f1b.pbtxt --json");
  ASSERT_EQ(r.code, 0) << r.out.substr(0, 500);
  EXPECT_EQ(r.out.rfind("{\"ranks\":[{\"rank\":0,\"coords\":{\"dp\":0,\"mp\":0,\"pp\":0}", 0), 0u);
  EXPECT_EQ(Lines(r.out), 1);
  // A flag overrides the file.
  Result one = Loom("plan --preset gpt-tiny --config configs/gpt-tiny-2x2x2-1f1b.pbtxt "
                    "--schedule FThenB --rank 5");
  ASSERT_EQ(one.code, 0) << one.out;
  EXPECT_NE(one.out.find("rank 5 (dp=0 mp=1 pp=1): F0 F1 F2 F3 B0 B1 B2 B3 O"),
            std::string::npos) << one.out;
}

TEST(Cli, ImpossiblePlansGiveOneLineErrors) {
  for (const char* args : {"--pp 3", "--mp 3", "--pp 2 --micro_batches 1",
                           "--dp 3", "--schedule Foo", "--pp 2 --vpp 2 --schedule VPP --micro_batches 4",
                           "--pp 2 --schedule ZBV --micro_batches 2",
                           "--pp 2 --schedule ZBV --vpp 3 --micro_batches 4"}) {
    Result r = Loom(std::string("plan --preset gpt-tiny ") + args);
    EXPECT_EQ(r.code, 1) << args << ": " << r.out;
    EXPECT_EQ(Lines(r.out), 1) << args << ": " << r.out;
    EXPECT_EQ(r.out.rfind("loom plan: ", 0), 0u) << r.out;
  }
}

// `loom plan -o` then `loom run --plan`: the saved plan trains exactly as
// the flags that made it, in one process and one rank per process.
TEST(Cli, SavedPlanRunsLikeItsFlags) {
  const std::string path = "/tmp/loom_cli_plan.plan";
  const std::string layout = "--preset gpt-tiny --dp 2 --pp 2 --micro_batches 2 --schedule 1F1B";
  Result plan = Loom("plan " + layout + " -o " + path);
  ASSERT_EQ(plan.code, 0) << plan.out;
  EXPECT_NE(plan.out.find("// saved to " + path + ": 2 program set(s) for 4 ranks"),
            std::string::npos) << plan.out;
  Result run = Loom("run " + layout + " --steps 3");
  Result from_file = Loom("run --plan " + path + " --steps 3");
  Result launch = Loom("launch --nproc 4 -- " + std::string(LOOM_BIN) + " run --plan " + path +
                       " --steps 3");
  ASSERT_EQ(run.code, 0) << run.out;
  ASSERT_EQ(from_file.code, 0) << from_file.out;
  ASSERT_EQ(launch.code, 0) << launch.out;
  ASSERT_EQ(LossLines(run.out).size(), 3u) << run.out;
  EXPECT_EQ(LossLines(from_file.out), LossLines(run.out)) << from_file.out;
  EXPECT_EQ(LossLines(launch.out), LossLines(run.out)) << launch.out;
  // Text format too.
  ASSERT_EQ(Loom("plan " + layout + " -o /tmp/loom_cli_plan.pbtxt").code, 0);
  Result text = Loom("run --plan /tmp/loom_cli_plan.pbtxt --steps 3");
  EXPECT_EQ(LossLines(text.out), LossLines(run.out)) << text.out;
}

TEST(Cli, SavedPlanFixesItsLayout) {
  const std::string path = "/tmp/loom_cli_plan_fixed.plan";
  ASSERT_EQ(Loom("plan --preset gpt-tiny --pp 2 --micro_batches 2 -o " + path).code, 0);
  Result mp = Loom("run --plan " + path + " --mp 2");
  EXPECT_EQ(mp.code, 1);
  EXPECT_EQ(mp.out, "loom run: --mp cannot be used with --plan: the plan fixes the layout and "
                    "schedule\n");
  Result schedule = Loom("run --plan " + path + " --schedule FThenB");
  EXPECT_EQ(schedule.out, "loom run: --schedule cannot be used with --plan: the plan fixes the "
                          "layout and schedule\n");
  Result preset = Loom("run --plan " + path + " --preset gpt-small");
  EXPECT_EQ(preset.out, "loom run: --preset cannot be used with --plan: the plan fixes the "
                        "model and its optimizer\n");
  Result launch = Loom("launch --nproc 3 -- " + std::string(LOOM_BIN) + " run --plan " + path);
  EXPECT_EQ(launch.code, 1);
  EXPECT_NE(launch.out.find("loom run: " + path + ": the plan has 2 ranks but loom launch "
                            "started 3"), std::string::npos) << launch.out;
  Result one_rank = Loom("plan --preset gpt-tiny --pp 2 --micro_batches 2 --rank 1 -o " + path);
  EXPECT_EQ(one_rank.out, "loom plan: -o saves every rank's plan; drop --rank and --all_ranks\n");
}

TEST(Cli, BadPlanFilesGiveOneLineErrors) {
  const std::string good = "/tmp/loom_cli_plan_good.pbtxt";
  const std::string bad = "/tmp/loom_cli_plan_bad.pbtxt";
  ASSERT_EQ(Loom("plan --preset gpt-tiny --mp 2 --pp 2 --micro_batches 2 -o " + good).code, 0);
  const std::string text = ReadWholeFile(good);
  auto run_edited = [&](const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    std::string edited = text;
    if (at != std::string::npos) edited.replace(at, from.size(), to);
    WriteWholeFile(bad, edited);
    Result r = Loom("run --plan " + bad + " --steps 1");
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_EQ(Lines(r.out), 1) << r.out;
    return r.out;
  };
  EXPECT_EQ(run_edited("program_set: 3\n", "program_set: 9\n"),
            "loom run: " + bad + ": rank 3: program_set 9 does not exist (the plan has 4)\n");
  EXPECT_EQ(run_edited("layout {\n  dp: 1\n", "layout {\n  dp: 2\n"),
            "loom run: " + bad + ": the plan lists 4 ranks but layout dp=2 mp=2 pp=2 has 8\n");
  EXPECT_EQ(run_edited("type: \"backward\"\n    micro_batch: 0", "type: \"bwd\"\n    micro_batch: 0"),
            "loom run: " + bad + ": rank 0, job 2: unknown job type 'bwd'\n");

  const std::string binary = "/tmp/loom_cli_plan_truncated.plan";
  ASSERT_EQ(Loom("plan --preset gpt-tiny --pp 2 --micro_batches 2 -o " + binary).code, 0);
  const std::string bytes = ReadWholeFile(binary);
  WriteWholeFile(binary, bytes.substr(0, bytes.size() - 100));
  Result truncated = Loom("run --plan " + binary);
  EXPECT_EQ(truncated.out, "loom run: " + binary + ": truncated plan: header promises " +
                               std::to_string(bytes.size() - 24) + " bytes, file holds " +
                               std::to_string(bytes.size() - 124) + "\n");
}

// loom plan --memory_limit: the saved plan is the fastest that fits (1F1B,
// or 1F1B-overlap with 3 micro-batches in flight: on `local` the two are
// within a few % of each other), says why with both steps, and runs.
TEST(Cli, PlanUnderAMemoryLimitRuns) {
  const std::string path = "/tmp/loom_cli_capped.plan";
  std::remove(path.c_str());
  const std::string layout =
      "plan --preset gpt-tiny --layers 4 --mp 2 --pp 2 --micro_batches 8 "
      "--schedule 1F1B-overlap --recompute none ";
  Result free = Loom(layout);
  ASSERT_EQ(free.code, 0) << free.out;
  EXPECT_NE(free.out.find("rank 0 (dp=0 mp=0 pp=0): F0 F1 F2 F3#0 "), std::string::npos)
      << free.out;
  // About 1.55 MB peak at the schedule's own depth (the communication
  // buffers' lifetimes follow the link's speed), 1.37 MB at 3 in flight.
  Result capped = Loom(layout + "--memory_limit 1450000 -o " + path);
  ASSERT_EQ(capped.code, 0) << capped.out;
  EXPECT_NE(capped.out.find("// memory limit 1.45 MB: 1F1B-overlap peaks at 1.5"),
            std::string::npos)
      << capped.out;
  // Both plans that fit, each with its peak and step, the faster named
  // first; the saved one is the faster.
  auto step_after = [&](std::initializer_list<const char*> prefixes) {
    for (const char* prefix : prefixes) {
      const size_t at = capped.out.find(prefix);
      if (at != std::string::npos) return std::atof(capped.out.c_str() + at + strlen(prefix));
    }
    ADD_FAILURE() << "none of the prefixes in\n" << capped.out;
    return 0.0;
  };
  const double plain = step_after({"1F1B fits (peak 1.34 MB on rank 0, step ",
                                   "faster than 1F1B (peak 1.34 MB on rank 0, step "});
  const double overlap =
      step_after({"3 micro-batches in flight per stage fit (peak 1.37 MB on rank 0, step ",
                  "1F1B-overlap at 3 micro-batches in flight (peak 1.37 MB on rank 0, step "});
  if (plain < overlap) {
    EXPECT_NE(capped.out.find("giving up the interleaving for memory"), std::string::npos)
        << capped.out;
    EXPECT_NE(capped.out.find("rank 0 (dp=0 mp=0 pp=0): F0 F1 B0 F2 B1 F3 B2 "),
              std::string::npos)
        << capped.out;
  } else {
    EXPECT_NE(capped.out.find("giving up overlap for memory"), std::string::npos) << capped.out;
    EXPECT_NE(capped.out.find("rank 0 (dp=0 mp=0 pp=0): F0 F1 F2#0 B0#0 F2#1 B0#1 F2#2 B0#2 "),
              std::string::npos)
        << capped.out;
  }
  Result run = Loom("run --plan " + path + " --steps 2");
  EXPECT_EQ(run.code, 0) << run.out;
  EXPECT_NE(run.out.find("step 1 loss"), std::string::npos) << run.out;
}

}  // namespace
