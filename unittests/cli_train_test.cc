// loom train and loom demo: serial training from the command line, its flags and its one-line errors.
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "scheduler/trace.h"
#include "unittests/loom_cli.h"

namespace {

using loom::FieldAfter;
using loom::Lines;
using loom::Loom;
using loom::ReadWholeFile;
using Result = loom::CliResult;

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
  // A flag another command reads is refused by name, not ignored; the
  // command's own flags, and glog's, pass.
  Result foreign = Loom("train --preset gpt-tiny --steps 1 --schedule 1F1B");
  EXPECT_EQ(foreign.code, 2);
  EXPECT_EQ(foreign.out,
            "loom train: --schedule is not a flag of 'loom train' ('loom train --help' lists "
            "its flags)\n");
  Result negated = Loom("show /nonexistent --nojson");
  EXPECT_EQ(negated.code, 2);
  EXPECT_NE(negated.out.find("--json is not a flag of 'loom show'"), std::string::npos)
      << negated.out;
  EXPECT_EQ(Loom("train --preset gpt-tiny --steps 1 --v=0 --dropout 0").code, 0);
}

// --help lists the command's flags, from the groups of what it reads: train
// reads the data and checkpoint flags and no strategy.
TEST(Cli, HelpListsOnlyTheCommandsOwnFlags) {
  Result train = Loom("train --help");
  ASSERT_EQ(train.code, 0) << train.out;
  for (const char* flag : {"--steps", "--data", "--save_dir", "--device", "--amp_level"}) {
    EXPECT_NE(train.out.find(flag), std::string::npos) << flag << "\n" << train.out;
  }
  for (const char* flag : {"--schedule", "--dp ", "--cluster", "--trace"}) {
    EXPECT_EQ(train.out.find(flag), std::string::npos) << flag << "\n" << train.out;
  }
  Result show = Loom("help show");
  ASSERT_EQ(show.code, 0);
  EXPECT_NE(show.out.find("--vars"), std::string::npos) << show.out;
  EXPECT_EQ(show.out.find("--preset"), std::string::npos) << show.out;
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

TEST(Cli, DemoTrainsBothWaysAndWritesATrace) {
  std::remove("/tmp/loom_cli_demo.html");
  Result r = Loom(
      "demo --demo_trace /tmp/loom_cli_demo_trace.json --demo_html "
      "/tmp/loom_cli_demo.html");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("largest serial/parallel difference"), std::string::npos);
  EXPECT_NE(r.out.find(" 199 "), std::string::npos);
  EXPECT_FALSE(ReadWholeFile("/tmp/loom_cli_demo_trace.json").empty());
  // The run simulated too, both timelines on one page.
  const std::string page = ReadWholeFile("/tmp/loom_cli_demo.html");
  EXPECT_NE(page.find("1F1B-overlap, measured (the last step)"), std::string::npos);
  EXPECT_NE(page.find("1F1B-overlap, simulated on cluster 'local'"), std::string::npos);
  // On a machine with no profile (this test's cache is empty) every op is
  // priced from the profile the demo took between its own steps, none by the
  // roofline (which put the step 37% short here). How close the step comes
  // is a timing, measured by hand (docs/performance.md, "The demo"), not
  // here: a test running beside this one moves the measured step alone.
  EXPECT_NE(r.out.find(" profiled, 0 scaled, 0 by the roofline)"), std::string::npos) << r.out;
  EXPECT_GT(FieldAfter(r.out, "by the roofline): "), 0) << r.out;
  EXPECT_GT(FieldAfter(r.out, "ms per step against "), 0) << r.out;
  // Its calls priced by the preset's links, and it says how to price them
  // by this host's.
  EXPECT_NE(r.out.find("Simulated on cluster 'local' (its calls priced by the preset's links; "
                       "`loom profile --comm` measures this host's"),
            std::string::npos)
      << r.out;
}

TEST(Cli, DemoRefusesAGpuClusterBeforeTraining) {
  Result r = Loom("demo --cluster h100");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "loom demo: --cluster h100 describes GPUs, but loom demo trains and simulates "
                   "on this host's CPU (use a CPU cluster such as local)\n");
}

}  // namespace
