// Training any saved program (issue 10): the IR is the interface. A GPT
// program written out and trained through ProgramTrainer gives the
// preset trainer's losses bit for bit; a hand-written one-op program runs
// on seeded feeds and its outputs can be read.
#include <cmath>
#include <cstdlib>

#include <gtest/gtest.h>

#include "framework/file_util.h"
#include "framework/serialization.h"
#include "runtime/program_trainer.h"
#include "runtime/serial_trainer.h"
#include "unittests/loom_cli.h"

namespace loom {
namespace {

TEST(ProgramTrainer, AGptProgramTrainsAsThePresetDoes) {
  const GptConfig c = GptPreset("gpt-tiny").value();
  TrainingProgram tp = BuildGptTrainingProgram(c).value();
  // Through text format and back, as `loom model -o` and `--program` do.
  Program main = Program::FromProto(tp.main.ToProto()).value();
  Program startup = Program::FromProto(tp.startup.ToProto()).value();
  const TokenFeed feed = TokenFeedOf(main);
  EXPECT_EQ(feed.vocab, c.vocab_size);
  EXPECT_EQ(feed.seq_len, c.seq_len);
  auto program = ProgramTrainer::Create(std::move(main), std::move(startup), "gpt.pbtxt", {});
  ASSERT_TRUE(program.ok()) << program.status();
  auto preset = SerialTrainer::Create(c, OptimizerConfig{}).value();
  for (int s = 0; s < 3; ++s) {
    const float want = preset->Step(s).value();
    auto got = (*program)->Step(s);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, want) << "step " << s;
  }
  // Its state is the preset's: same names, same values.
  const TrainingState a = preset->State().value(), b = (*program)->State().value();
  ASSERT_EQ(a.parameters.size(), b.parameters.size());
  ASSERT_EQ(a.optimizer.size(), b.optimizer.size());
  for (const auto& [name, t] : a.parameters) {
    EXPECT_EQ(t.ToFloatVector(), b.parameters.at(name).ToFloatVector()) << name;
  }
}

Program OneMatmul() {
  proto::ProgramDesc desc;
  ParseTextProto(R"(blocks {
    idx: 0
    vars { name: "x" shape: 2 shape: 3 is_data: true }
    vars { name: "y" shape: 3 shape: 2 is_data: true }
    vars { name: "out" shape: 2 shape: 2 }
    ops { type: "matmul" inputs { name: "X" vars: "x" } inputs { name: "Y" vars: "y" }
          outputs { name: "Out" vars: "out" } } })",
                 "one_op", &desc)
      .IgnoreError();
  return Program::FromProto(desc).value();
}

TEST(ProgramTrainer, RunsOneOpOnSeededFeeds) {
  ProgramTrainer::Options options;
  options.fetch = {"x", "y", "out"};
  auto t = ProgramTrainer::Create(OneMatmul(), Program(), "one_op", options).value();
  std::vector<float> first_x;
  for (int step = 0; step < 2; ++step) {
    const StatusOr<float> loss = t->Step(step);
    ASSERT_TRUE(loss.ok()) << loss.status();
    EXPECT_TRUE(std::isnan(*loss));  // no loss var
    const std::vector<float> x = t->FetchVar("x").value()->ToFloatVector();
    const std::vector<float> y = t->FetchVar("y").value()->ToFloatVector();
    const std::vector<float> out = t->FetchVar("out").value()->ToFloatVector();
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 2; ++j) {
        float want = 0;
        for (int k = 0; k < 3; ++k) want += x[i * 3 + k] * y[k * 2 + j];
        EXPECT_NEAR(out[i * 2 + j], want, 1e-6);
      }
    }
    for (float v : x) EXPECT_TRUE(v >= -1 && v < 1);
    if (step == 0) first_x = x;
    if (step == 1) {
      EXPECT_NE(x, first_x);  // fresh feeds each step
    }
  }
  EXPECT_EQ(t->FetchVar("nope").status().code(), StatusCode::kNotFound);
  options.fetch = {"nope"};
  EXPECT_NE(ProgramTrainer::Create(OneMatmul(), Program(), "one_op", options)
                .status()
                .message()
                .find("one_op has no var 'nope' to fetch"),
            std::string::npos);
}

TEST(ProgramTrainer, CliTrainsAProgramFromLoomModel) {
  const std::string dir = ::testing::TempDir();
  CliResult r = Loom(StrCat("model --preset gpt-tiny -o ", dir, "/m.pbtxt --startup ", dir,
                            "/s.pbtxt"));
  ASSERT_EQ(r.code, 0) << r.out;
  const CliResult preset = Loom("train --steps 2");
  r = Loom(StrCat("train --program ", dir, "/m.pbtxt --startup ", dir, "/s.pbtxt --steps 2"));
  ASSERT_EQ(r.code, 0) << r.out;
  // The same losses (the times differ).
  for (const char* step : {"step 0 loss ", "step 1 loss "}) {
    const size_t a = preset.out.find(step), b = r.out.find(step);
    ASSERT_NE(a, std::string::npos);
    ASSERT_NE(b, std::string::npos) << r.out;
    EXPECT_EQ(preset.out.substr(a, 21), r.out.substr(b, 21));
  }
  r = Loom(StrCat("train --program ", dir, "/m.pbtxt --steps 1"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("' is not initialized (run the startup program first)"),
            std::string::npos)
      << r.out;
  r = Loom(StrCat("train --program ", dir, "/m.pbtxt --layers 3 --steps 1"));
  EXPECT_NE(r.out.find("--layers cannot be used with --program"), std::string::npos) << r.out;
}

// The loss printed after "step K loss ", or NaN.
double LossOf(const std::string& out, int step) {
  const std::string label = StrCat("step ", step, " loss ");
  const size_t at = out.find(label);
  return at == std::string::npos ? NAN : std::atof(out.c_str() + at + label.size());
}

// loom run plans a program file as it plans a preset, and a checkpoint of
// `loom train --program` resumes there under another layout.
TEST(ProgramTrainer, CliRunsAProgramUnderALayout) {
  const std::string dir = ::testing::TempDir();
  const std::string files = StrCat(" --program ", dir, "/r.pbtxt --startup ", dir, "/rs.pbtxt");
  ASSERT_EQ(Loom(StrCat("model --preset gpt-tiny -o ", dir, "/r.pbtxt --startup ", dir,
                        "/rs.pbtxt")).code, 0);
  const CliResult serial = Loom(StrCat("train --steps 4 --save_dir ", dir, "/rck --save_every 2",
                                       files));
  ASSERT_EQ(serial.code, 0) << serial.out;
  CliResult r = Loom(StrCat("run --dp 2 --mp 2 --pp 2 --micro_batches 2 --steps 2", files));
  ASSERT_EQ(r.code, 0) << r.out;
  for (int s = 0; s < 2; ++s) EXPECT_NEAR(LossOf(r.out, s), LossOf(serial.out, s), 2e-6) << r.out;
  r = Loom(StrCat("run --mp 2 --steps 4 --resume ", dir, "/rck/step-00000002", files));
  ASSERT_EQ(r.code, 0) << r.out;
  for (int s = 2; s < 4; ++s) EXPECT_NEAR(LossOf(r.out, s), LossOf(serial.out, s), 2e-6) << r.out;
  // A preset run does not take the program's checkpoint.
  r = Loom(StrCat("run --mp 2 --steps 4 --resume ", dir, "/rck"));
  EXPECT_NE(r.out.find(": saved by a run of a program file (CRC-32 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("but this run trains a preset model"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace loom
