// The loom binary: its output and its one-line errors.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "scheduler/trace.h"
#include "unittests/loom_cli.h"

namespace {

using loom::Lines;
using loom::Loom;
using Result = loom::CliResult;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(Cli, ModelThenShow) {
  Result m = Loom("model --preset gpt-tiny -o /tmp/loom_cli_tiny.pb");
  ASSERT_EQ(m.code, 0) << m.out;
  Result s = Loom("show /tmp/loom_cli_tiny.pb");
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("program: 1 block(s)"), std::string::npos);
  EXPECT_NE(s.out.find("forward        lookup_table"), std::string::npos) << s.out.substr(0, 600);
  EXPECT_NE(s.out.find("backward|loss  fill_constant"), std::string::npos);
  EXPECT_NE(s.out.find("optimize       adamw"), std::string::npos);
}

// loom ops shows each attribute's default and the range the verifier holds
// it to, a list's range holding for each entry.
TEST(Cli, OpsShowAttributeRanges) {
  Result r = Loom("ops dropout");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("attrs: dropout_prob=0.5 (in [0, 1)) seed=0 is_test=false "
                       "full_shape=[] (each in [1, max]) shard_offsets=[] (each in [0, max])"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("index in the full row"), std::string::npos) << r.out;
}

// loom ops says which devices have a kernel for each op, and that a
// collective alone is the communicators'.
TEST(Cli, OpsShowTheDevicesWithAKernel) {
  Result r = Loom("ops gelu allreduce");
  ASSERT_EQ(r.code, 0) << r.out;
#ifdef LOOM_WITH_CUDA
  EXPECT_NE(r.out.find("kernels: cpu cuda\n"), std::string::npos) << r.out;
#else
  EXPECT_NE(r.out.find("kernels: cpu\n"), std::string::npos) << r.out;
#endif
  EXPECT_NE(r.out.find("kernels: none (the communicators run it)\n"), std::string::npos) << r.out;
}

// --device cuda trains where there is a GPU and says in one line why not
// where there is none; an unknown device is named.
TEST(Cli, DeviceCudaTrainsOrSaysWhyNot) {
  for (const char* command : {"run", "train"}) {
    Result r = Loom(std::string(command) + " --device cuda --steps 1");
    if (r.code == 0) {
      EXPECT_NE(r.out.find("step 0 loss"), std::string::npos) << command << ": " << r.out;
      continue;
    }
    EXPECT_TRUE(r.out.find("--device cuda: no CUDA device (") != std::string::npos ||
                r.out.find("--device cuda: this build has no CUDA backend") != std::string::npos)
        << command << ": " << r.out;
  }
  // loom profile times a device's kernels into its cluster's rows.
  Result cpu_rows = Loom("profile --device cuda --cluster local");
  EXPECT_NE(cpu_rows.code, 0);
  EXPECT_NE(cpu_rows.out.find("--device cuda times GPU kernels, but --cluster local describes "
                              "CPUs"),
            std::string::npos)
      << cpu_rows.out;
  Result bad = Loom("run --device tpu --steps 1");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("--device: unknown device 'tpu' (cpu or cuda)"), std::string::npos)
      << bad.out;
}

// The same program written as binary and as text lists the same, every
// op and var (with --vars), and text written back from the text reads the
// same again.
TEST(Cli, TextFormatRoundTrips) {
  ASSERT_EQ(Loom("model --preset gpt-tiny --layers 1 -o /tmp/loom_cli_rt.pb").code, 0);
  ASSERT_EQ(Loom("model --preset gpt-tiny --layers 1 -o /tmp/loom_cli_rt.pbtxt").code, 0);
  Result binary = Loom("show /tmp/loom_cli_rt.pb --vars");
  Result text = Loom("show /tmp/loom_cli_rt.pbtxt --vars");
  ASSERT_EQ(binary.code, 0) << binary.out;
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_GT(Lines(text.out), 100) << text.out;
  EXPECT_EQ(text.out, binary.out);
  // Through a pass that changes nothing, written back as text.
  ASSERT_EQ(Loom("opt /tmp/loom_cli_rt.pbtxt --test_passes --passes no-op -o "
                 "/tmp/loom_cli_rt2.pbtxt").code, 0);
  Result again = Loom("show /tmp/loom_cli_rt2.pbtxt --vars");
  EXPECT_EQ(again.out, text.out);
}

// `loom passes` prints each option with its default and the values it
// takes, from the registry's one table; the passes that test the pass
// manager are not the product's and are not listed.
TEST(Cli, PassesListsTheProductsPassesWithTheirOptions) {
  Result r = Loom("passes");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("    degree=1  mp ranks; an integer in [1, 1048576]"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("    fetch-mode=all_gather  "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("no-op"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("test-fail"), std::string::npos) << r.out;
}

TEST(Cli, TruncatedAndCorruptedFilesGiveOneLineErrors) {
  ASSERT_EQ(Loom("model --preset gpt-tiny -o /tmp/loom_cli_good.pb").code, 0);
  std::string bytes = ReadFile("/tmp/loom_cli_good.pb");
  for (size_t keep : {size_t{0}, size_t{7}, size_t{30}, bytes.size() / 2, bytes.size() - 1}) {
    WriteFile("/tmp/loom_cli_bad.pb", bytes.substr(0, keep));
    Result r = Loom("show /tmp/loom_cli_bad.pb");
    EXPECT_EQ(r.code, 1) << keep << ": " << r.out;
    EXPECT_EQ(Lines(r.out), 1) << keep << ": " << r.out;
    EXPECT_EQ(r.out.rfind("loom show: /tmp/loom_cli_bad.pb: ", 0), 0u) << r.out;
  }
  std::string flipped = bytes;
  for (size_t i = 40; i < flipped.size(); i += 997) flipped[i] ^= 0x21;
  WriteFile("/tmp/loom_cli_bad.pb", flipped);
  Result r = Loom("show /tmp/loom_cli_bad.pb");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "loom show: /tmp/loom_cli_bad.pb: corrupted program: checksum mismatch\n");
  WriteFile("/tmp/loom_cli_bad.pbtxt", "blocks { idx: 0 ops { type: \"scale\" ");
  r = Loom("show /tmp/loom_cli_bad.pbtxt");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(Lines(r.out), 1) << r.out;
  Result missing = Loom("show /tmp/loom_no_such_file.pb");
  EXPECT_EQ(missing.out, "loom show: /tmp/loom_no_such_file.pb: cannot open\n");
}

TEST(Cli, TrainPrintsEveryStep) {
  Result r = Loom("train --preset gpt-tiny --steps 3 --seed 2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(Lines(r.out), 3) << r.out;
  EXPECT_EQ(r.out.rfind("step 0 loss ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("step 2 loss "), std::string::npos);
  EXPECT_NE(r.out.find(" time_ms "), std::string::npos);
}

TEST(Cli, SameSeedSameLossAndBadFlags) {
  Result env = Loom("train --preset gpt-tiny --steps 1 --seed 2");
  Result env2 = Loom("train --preset gpt-tiny --steps 1 --seed 2");
  ASSERT_EQ(env.code, 0);
  // Same seed, same loss (times differ).
  EXPECT_EQ(env.out.substr(0, 20), env2.out.substr(0, 20));
  Result bad = Loom("train --preset gpt-huge --steps 1");
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(Lines(bad.out), 1) << bad.out;
  Result unknown = Loom("frobnicate");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_EQ(Lines(unknown.out), 1);
}

// A precision flag that would change nothing is refused, by name, on the
// serial and the parallel commands alike.
TEST(Cli, PrecisionFlagsThatChangeNothingAreRefused) {
  for (const char* command : {"train --preset gpt-tiny --steps 1", "plan --preset gpt-tiny"}) {
    SCOPED_TRACE(command);
    Result r = Loom(std::string(command) + " --amp_dtype fp16");
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("--amp_dtype fp16 does nothing at amp level O0"), std::string::npos)
        << r.out;
    EXPECT_EQ(Lines(r.out), 1) << r.out;
    r = Loom(std::string(command) + " --amp_level O2 --init_loss_scale 1024");
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("--init_loss_scale applies to fp16 training only"), std::string::npos)
        << r.out;
  }
  Result r = Loom("plan --preset gpt-tiny --dp 2 --grad_reduce_dtype bf16");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("amp.grad_reduce_dtype: 'bf16' is not fp32 (amp.level is O0"),
            std::string::npos)
      << r.out;
}

// The GPT-3 presets train by their recipe where no flag says otherwise
// (models/training_recipe.h), and say so; a flag, or --recipe none, wins.
TEST(Cli, Gpt3PresetsTakeTheirRecipe) {
  Result r = Loom("plan --preset gpt3-1.3b --layers 1 --dp 4 --batch_size 8 --rank 0");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("trains by the gpt3 recipe where flags do not say: bf16 O2, adamw lr "
                       "0.0002 warm-up 22888 steps, cosine to 2e-05 at step 15869141, clip 1, "
                       "micro-batch size 1"),
            std::string::npos)
      << r.out;
  // Micro-batches of one sequence: 8 / dp 4 = 2 per replica.
  EXPECT_NE(r.out.find("gradient-accumulation{steps=2}"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("grad-clip{"), std::string::npos) << r.out;
  // bf16 O2: the forward reads the bf16 copies of its parameters, which the
  // optimizer makes (low-precision-weights); its one cast is the logits'
  // to fp32 for the loss (29 ops in fp32).
  EXPECT_NE(r.out.find(",low-precision-weights,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("forward: 30 ops"), std::string::npos) << r.out;
  Result given = Loom("plan --preset gpt3-1.3b --layers 1 --dp 4 --batch_size 8 --rank 0 "
                      "--micro_batches 1 --amp_level O0 --clip_grad_norm 0");
  ASSERT_EQ(given.code, 0) << given.out;
  EXPECT_NE(given.out.find("gradient-accumulation{steps=1}"), std::string::npos) << given.out;
  EXPECT_EQ(given.out.find("grad-clip{"), std::string::npos) << given.out;
  Result none = Loom("plan --preset gpt3-1.3b --layers 1 --dp 4 --batch_size 8 --rank 0 "
                     "--recipe none");
  ASSERT_EQ(none.code, 0) << none.out;
  EXPECT_EQ(none.out.find("recipe"), std::string::npos) << none.out;
  EXPECT_NE(none.out.find("forward: 29 ops"), std::string::npos) << none.out;
  EXPECT_NE(none.out.find("gradient-accumulation{steps=1}"), std::string::npos) << none.out;
  Result tiny = Loom("plan --preset gpt-tiny --dp 2");
  EXPECT_EQ(tiny.out.find("recipe"), std::string::npos) << tiny.out;
  Result odd = Loom("plan --preset gpt3-1.3b --layers 1 --dp 3 --batch_size 8");
  EXPECT_EQ(odd.code, 1);
  EXPECT_NE(odd.out.find("the gpt3 recipe's micro-batch size 1 does not divide the batch of 8 "
                         "over dp=3"),
            std::string::npos)
      << odd.out;
}

TEST(Cli, EnvironmentVariableSetsAFlag) {
  Result r = Loom("train --preset gpt-tiny", "FLAGS_steps=2");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(Lines(r.out), 2) << r.out;
}

}  // namespace

namespace {

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

}  // namespace

namespace {

std::vector<std::string> LossLines(const std::string& out) {
  std::vector<std::string> lines;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("step ", 0) == 0) lines.push_back(line.substr(0, line.find(" time_ms")));
  }
  return lines;
}

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
  const std::string trace = ReadFile("/tmp/loom_cli_trace.json");
  EXPECT_EQ(trace.rfind("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", 0), 0u);
  EXPECT_NE(trace.find("\"args\":{\"name\":\"rank 3\"}"), std::string::npos);
  EXPECT_NE(trace.find("\"args\":{\"name\":\"p2p_send\"}"), std::string::npos);
}

TEST(Cli, LaunchNamesTheRankThatFails) {
  Result r = Loom("launch --nproc 2 -- " + std::string(LOOM_BIN) +
                  " run --preset gpt-tiny --dp 3 --steps 1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("loom launch: rank "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exited with status 1; stopping the other ranks"), std::string::npos)
      << r.out;
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
  // Every rank's instructions are there: rank 3's too.
  EXPECT_NE(c.out.find("  r3 "), std::string::npos) << c.out;
  Result missing = Loom("simulate" + model + " --compare " + dir + "/nothing.json");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find(dir + "/nothing.json"), std::string::npos) << missing.out;
}

// The number printed right after `label` in `out`, or -1.
double FieldAfter(const std::string& out, const std::string& label) {
  const size_t at = out.find(label);
  return at == std::string::npos ? -1 : std::atof(out.c_str() + at + label.size());
}

TEST(Cli, DemoTrainsBothWaysAndWritesATrace) {
  std::remove("/tmp/loom_cli_demo.html");
  Result r = Loom("demo --demo_trace /tmp/loom_cli_demo_trace.json --demo_html "
                  "/tmp/loom_cli_demo.html --cost_table /tmp/loom_cli_demo_table.pbtxt");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("largest serial/parallel difference"), std::string::npos);
  EXPECT_NE(r.out.find(" 199 "), std::string::npos);
  EXPECT_FALSE(ReadFile("/tmp/loom_cli_demo_trace.json").empty());
  // The run simulated too, both timelines on one page.
  EXPECT_NE(r.out.find("Simulated on this host's cluster description"), std::string::npos);
  const std::string page = ReadFile("/tmp/loom_cli_demo.html");
  EXPECT_NE(page.find("1F1B-overlap, measured (the last step)"), std::string::npos);
  EXPECT_NE(page.find("1F1B-overlap, simulated on cluster 'local'"), std::string::npos);
  EXPECT_NE(page.find("1F1B, simulated on cluster 'local'"), std::string::npos);
  // The overlap against plain 1F1B, both simulated: less exposed mp.
  const double overlap = FieldAfter(r.out, "ms measured and ");
  const double plain = FieldAfter(r.out, "simulated under 1F1B-overlap; ");
  EXPECT_GT(plain, 0) << r.out;
  EXPECT_LT(overlap, plain) << r.out;
}

}  // namespace

namespace {

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

namespace {

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
  const std::string text = ReadFile(good);
  auto run_edited = [&](const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    std::string edited = text;
    if (at != std::string::npos) edited.replace(at, from.size(), to);
    WriteFile(bad, edited);
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
  const std::string bytes = ReadFile(binary);
  WriteFile(binary, bytes.substr(0, bytes.size() - 100));
  Result truncated = Loom("run --plan " + binary);
  EXPECT_EQ(truncated.out, "loom run: " + binary + ": truncated plan: header promises " +
                               std::to_string(bytes.size() - 24) + " bytes, file holds " +
                               std::to_string(bytes.size() - 124) + "\n");
}

}  // namespace

// ---- loom simulate ----------------------------------------------------------

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
  EXPECT_NE(over.out.find("device memory  8 of 8 ranks do not fit 85.9 GB: rank 0 needs 2533.8 GB "
                          "of 85.9 GB: activations 2444.0 GB (8 layers, 0 recomputed), "
                          "gradients 78.8 GB, optimizer state 7.3 GB, parameters 3.7 GB; rank 1 "
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

// loom plan --memory_limit: the saved plan is the fastest that fits (here
// 1F1B-overlap with 3 micro-batches in flight: 1F1B would fit too, but is
// slower on `local`, whose 4 ranks on 2 cores pay each call's CPU), says
// why, and runs.
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
  // 1.54 MB peak at the schedule's own depth, 1.36 MB at 3 in flight.
  Result capped = Loom(layout + "--memory_limit 1450000 -o " + path);
  ASSERT_EQ(capped.code, 0) << capped.out;
  EXPECT_NE(capped.out.find("// memory limit 1.45 MB: 1F1B-overlap peaks at 1.54 MB on rank 0; "
                            "at most 3 micro-batches in flight per stage fit (peak 1.36 MB"),
            std::string::npos)
      << capped.out;
  EXPECT_NE(capped.out.find("faster than 1F1B (peak 1.33 MB on rank 0"), std::string::npos)
      << capped.out;
  EXPECT_NE(capped.out.find("rank 0 (dp=0 mp=0 pp=0): F0 F1 F2#0 B0#0 F2#1 B0#1 F2#2 B0#2 "),
            std::string::npos)
      << capped.out;
  Result run = Loom("run --plan " + path + " --steps 2");
  EXPECT_EQ(run.code, 0) << run.out;
  EXPECT_NE(run.out.find("step 1 loss"), std::string::npos) << run.out;
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
