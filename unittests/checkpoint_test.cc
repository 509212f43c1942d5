// Checkpoints (issue 10): safetensors files that read back exactly and
// name what is wrong with a damaged one; a resumed run that continues the
// loss curve bit for bit under its own layout and within 1e-5 under
// another; a save killed at any moment leaving the last complete
// checkpoint loadable.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "framework/file_util.h"
#include "runtime/checkpoint.h"
#include "runtime/parallel_trainer.h"
#include "runtime/safetensors.h"
#include "runtime/serial_trainer.h"
#include "runtime/training_loop.h"
#include "unittests/loom_cli.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

std::string TempDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / StrCat("loom-ckpt-", getpid(), "-", name);
  fs::remove_all(dir);
  return dir.string();
}

GptConfig Tiny() {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.batch_size = 8;
  return c;
}

// The largest |a - b| over every tensor of both states, which must name
// the same tensors with the same shapes; 0 means bit-equal values.
double WorstDifference(const TrainingState& a, const TrainingState& b) {
  double worst = 0;
  for (auto [x, y] : {std::pair{&a.parameters, &b.parameters},
                      std::pair{&a.optimizer, &b.optimizer}}) {
    EXPECT_EQ(x->size(), y->size());
    for (const auto& [name, t] : *x) {
      auto it = y->find(name);
      EXPECT_NE(it, y->end()) << name;
      if (it == y->end()) continue;
      EXPECT_EQ(t.shape(), it->second.shape()) << name;
      if (t.shape() != it->second.shape()) continue;
      const std::vector<float> p = t.ToFloatVector(), q = it->second.ToFloatVector();
      for (size_t i = 0; i < p.size(); ++i) {
        if (std::memcmp(&p[i], &q[i], sizeof(float)) == 0) continue;
        worst = std::max(worst, std::fabs(static_cast<double>(p[i]) - q[i]));
        if (std::isnan(worst)) return INFINITY;
      }
    }
  }
  return worst;
}

// Runs `trainer` over steps [first, last), returning the losses.
std::vector<float> Train(Trainer& trainer, int64_t first, int64_t last) {
  std::vector<float> losses;
  for (int64_t s = first; s < last; ++s) {
    StatusOr<float> loss = trainer.Step(s);
    EXPECT_TRUE(loss.ok()) << loss.status();
    losses.push_back(loss.ok() ? *loss : NAN);
  }
  return losses;
}

std::unique_ptr<ParallelTrainer> Parallel(const GptConfig& c, const OptimizerConfig& opt, int dp,
                                          int mp, int pp, const char* schedule) {
  ParallelTrainer::Options options;
  options.comm.timeout = std::chrono::seconds(30);
  auto t = ParallelTrainer::Create(c, opt, MakeStrategy(dp, mp, pp, 2, schedule), options);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

TEST(Safetensors, EveryDtypeReadsBackExactly) {
  SafetensorsContents in;
  in.metadata = {{"format", "pt"}, {"note", "a \"quoted\" value"}};
  Tensor f(TensorMeta{proto::FP32, {2, 3}});
  for (int i = 0; i < 6; ++i) f.data<float>()[i] = 0.5f * i - 1;
  Tensor l(TensorMeta{proto::INT64, {4}});
  for (int i = 0; i < 4; ++i) l.data<int64_t>()[i] = int64_t{1} << (10 * i);
  Tensor b(TensorMeta{proto::BOOL, {3}});
  b.data<bool>()[0] = true, b.data<bool>()[1] = false, b.data<bool>()[2] = true;
  in.tensors.emplace("w.weight", f);
  in.tensors.emplace("steps", l);
  in.tensors.emplace("mask", b);
  const std::string bytes = EncodeSafetensors(in);
  // The header length is little-endian and the data starts 8-aligned.
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  EXPECT_EQ(header % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + header + 24 + 32 + 3);
  auto out = DecodeSafetensors(bytes, "x.safetensors");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->metadata, in.metadata);
  ASSERT_EQ(out->tensors.size(), 3u);
  EXPECT_EQ(out->tensors.at("w.weight").ToFloatVector(), f.ToFloatVector());
  EXPECT_EQ(out->tensors.at("steps").ToInt64Vector(), l.ToInt64Vector());
  EXPECT_EQ(out->tensors.at("mask").shape(), Shape{3});
  EXPECT_TRUE(out->tensors.at("mask").data<bool>()[2]);
}

TEST(Safetensors, DamagedFilesNameWhatIsWrong) {
  SafetensorsContents in;
  Tensor f(TensorMeta{proto::FP32, {4}});
  for (int i = 0; i < 4; ++i) f.data<float>()[i] = i;
  in.tensors.emplace("a", f);
  in.tensors.emplace("b", f);
  const std::string good = EncodeSafetensors(in);
  auto error = [](const std::string& bytes) {
    auto r = DecodeSafetensors(bytes, "f.safetensors");
    return r.ok() ? std::string("OK") : r.status().message();
  };
  EXPECT_NE(error(good.substr(0, 5)).find("shorter than its 8-byte header"), std::string::npos);
  EXPECT_NE(error(good.substr(0, good.size() - 1)).find("the tensors hold 32 bytes but the file "
                                                       "has 31"),
            std::string::npos);
  std::string huge = good;
  huge[7] = 0x7f;
  EXPECT_NE(error(huge).find("the header claims"), std::string::npos);
  // Rewrite the header by hand: overlapping ranges, a bad dtype, a shape
  // that does not fit its range.
  auto with_header = [](const std::string& json, size_t data_bytes) {
    std::string out(8, '\0');
    const uint64_t n = json.size();
    std::memcpy(out.data(), &n, 8);
    return out + json + std::string(data_bytes, '\0');
  };
  EXPECT_NE(error(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                              R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                              12))
                .find("tensor 'b' starts at byte 4 where 8 was expected"),
            std::string::npos);
  EXPECT_NE(error(with_header(R"({"a":{"dtype":"Q8","shape":[2],"data_offsets":[0,2]}})", 2))
                .find("tensor 'a': dtype 'Q8'"),
            std::string::npos);
  EXPECT_NE(error(with_header(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8))
                .find("tensor 'a': data_offsets [0,8] hold 8 bytes, but F32 [3] needs 12"),
            std::string::npos);
  EXPECT_NE(error(with_header("{not json", 0)).find("not a JSON object"), std::string::npos);
}

TEST(Checkpoint, SerialResumeIsBitIdentical) {
  const GptConfig c = Tiny();
  const OptimizerConfig adamw;
  auto straight = SerialTrainer::Create(c, adamw).value();
  const std::vector<float> want = Train(*straight, 0, 6);

  const std::string dir = TempDir("serial");
  auto first = SerialTrainer::Create(c, adamw).value();
  Train(*first, 0, 3);
  CheckpointInfo info;
  info.step = 3;
  info.model = GptConfigToMap(c);
  info.layout = first->Layout();
  ASSERT_TRUE(SaveCheckpoint(dir, info, first->State().value(), 3).ok());
  first.reset();

  auto checkpoint = LoadCheckpoint(dir);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ(checkpoint->info.step, 3);
  EXPECT_EQ(checkpoint->path, dir + "/step-00000003");
  // Every parameter and the AdamW state of each: 2 moments, 2 beta powers.
  EXPECT_EQ(checkpoint->state.optimizer.size(), 4 * checkpoint->state.parameters.size());
  auto resumed = SerialTrainer::Create(c, adamw).value();
  ASSERT_TRUE(resumed->SetState(checkpoint->state, checkpoint->path).ok());
  const std::vector<float> got = Train(*resumed, 3, 6);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(got[i], want[3 + i]) << "step " << 3 + i;
  EXPECT_EQ(WorstDifference(resumed->State().value(), straight->State().value()), 0.0);
  fs::remove_all(dir);
}

// Saved under dp2 x mp2 x pp2: resumes bit for bit under the same layout,
// and within 1e-5 serially and under mp4.
TEST(Checkpoint, ParallelResumeUnderAnyLayout) {
  const GptConfig c = Tiny();
  const OptimizerConfig adamw;
  auto serial = SerialTrainer::Create(c, adamw).value();
  const std::vector<float> want = Train(*serial, 0, 4);
  const TrainingState serial_end = serial->State().value();

  const std::string dir = TempDir("parallel");
  auto saver = Parallel(c, adamw, 2, 2, 2, "1F1B");
  ASSERT_NE(saver, nullptr);
  Train(*saver, 0, 2);
  CheckpointInfo info;
  info.step = 2;
  info.model = GptConfigToMap(c);
  info.layout = saver->Layout();
  const TrainingState saved = saver->State().value();
  // The gathered tensors are serial training's, full size.
  auto serial_at_2 = SerialTrainer::Create(c, adamw).value();
  Train(*serial_at_2, 0, 2);
  EXPECT_LT(WorstDifference(saved, serial_at_2->State().value()), 1e-5);
  ASSERT_TRUE(SaveCheckpoint(dir, info, saved, 3).ok());
  const std::vector<float> straight = Train(*saver, 2, 4);
  const TrainingState straight_end = saver->State().value();
  saver.reset();
  const Checkpoint checkpoint = LoadCheckpoint(dir).value();

  auto same = Parallel(c, adamw, 2, 2, 2, "1F1B");
  ASSERT_TRUE(same->SetState(checkpoint.state, checkpoint.path).ok());
  const std::vector<float> got_same = Train(*same, 2, 4);
  EXPECT_EQ(got_same, straight);
  EXPECT_EQ(WorstDifference(same->State().value(), straight_end), 0.0);

  std::unique_ptr<Trainer> others[] = {SerialTrainer::Create(c, adamw).value(),
                                       Parallel(c, adamw, 1, 4, 1, "1F1B"),
                                       Parallel(c, adamw, 1, 1, 2, "ZBH1")};
  for (auto& t : others) {
    SCOPED_TRACE(t->Layout());
    ASSERT_TRUE(t->SetState(checkpoint.state, checkpoint.path).ok());
    const std::vector<float> got = Train(*t, 2, 4);
    for (int i = 0; i < 2; ++i) EXPECT_NEAR(got[i], want[2 + i], 1e-5) << "step " << 2 + i;
    EXPECT_LT(WorstDifference(t->State().value(), serial_end), 1e-5);
  }
  fs::remove_all(dir);
}

TEST(Checkpoint, KeepsTheNewestAndSkipsDamagedOnes) {
  const GptConfig c = Tiny();
  auto t = SerialTrainer::Create(c, OptimizerConfig{}).value();
  const std::string dir = TempDir("keep");
  CheckpointInfo info;
  info.model = GptConfigToMap(c);
  for (int step = 1; step <= 4; ++step) {
    info.step = step;
    ASSERT_TRUE(SaveCheckpoint(dir, info, t->State().value(), 2).ok());
  }
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"step-00000003", "step-00000004"}));

  // One flipped byte in the newest: named when it is asked for, skipped
  // when the directory is.
  const std::string newest = dir + "/step-00000004/model.safetensors";
  {
    std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x5a');
  }
  auto direct = LoadCheckpoint(dir + "/step-00000004");
  ASSERT_FALSE(direct.ok());
  EXPECT_NE(direct.status().message().find(newest + ": "), std::string::npos) << direct.status();
  EXPECT_NE(direct.status().message().find("the file is damaged"), std::string::npos);
  auto latest = LoadCheckpoint(dir);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->info.step, 3);
  // A save that never finished (no manifest) is not taken either.
  fs::create_directories(dir + "/step-00000009");
  EXPECT_EQ(LoadCheckpoint(dir)->info.step, 3);
  fs::remove_all(dir);
}

TEST(Checkpoint, AnotherModelOrOptimizerIsNamed) {
  const GptConfig c = Tiny();
  const std::string dir = TempDir("mismatch");
  auto t = SerialTrainer::Create(c, OptimizerConfig{}).value();
  CheckpointInfo info;
  info.step = 1;
  info.model = GptConfigToMap(c);
  ASSERT_TRUE(SaveCheckpoint(dir, info, t->State().value(), 1).ok());
  const Checkpoint checkpoint = LoadCheckpoint(dir).value();

  GptConfig deeper = c;
  deeper.num_layers = 3;
  Status s = CheckResumable(checkpoint, GptConfigToMap(deeper));
  EXPECT_NE(s.message().find("saved by a run with model num_layers = 2, but this run has 3"),
            std::string::npos)
      << s;
  OptimizerConfig sgd;
  sgd.type = "sgd";
  auto plain = SerialTrainer::Create(c, sgd).value();
  s = plain->SetState(checkpoint.state, checkpoint.path);
  EXPECT_NE(s.message().find(", which this run does not have (another model or optimizer)"), std::string::npos) << s;
  // And the other way: an SGD checkpoint lacks AdamW's state.
  info.step = 2;
  ASSERT_TRUE(SaveCheckpoint(dir, info, plain->State().value(), 1).ok());
  s = t->SetState(LoadCheckpoint(dir)->state, "ckpt");
  EXPECT_NE(s.message().find("ckpt has no optimizer state "), std::string::npos) << s;
  fs::remove_all(dir);
}

// A diverging step is undone and skipped with skip_nonfinite, or stops
// training naming the step without.
TEST(TrainingLoop, SkipsOrStopsAtANonFiniteLoss) {
  const GptConfig c = Tiny();
  OptimizerConfig huge;
  huge.type = "sgd";
  huge.learning_rate = 1e30f;
  auto t = SerialTrainer::Create(c, huge).value();
  const TrainingState before = t->State().value();
  TrainingLoopOptions options;
  options.steps = 3;
  std::vector<std::string> notes;
  int steps_done = 0;
  auto on_step = [&](const StepReport&) { ++steps_done; };
  auto on_note = [&](const std::string& n) { notes.push_back(n); };
  // Step 0's loss is finite (the update is what overflows); step 1's is not.
  Status stopped = RunTrainingLoop(*t, options, on_step, on_note);
  EXPECT_EQ(stopped.code(), StatusCode::kAborted) << stopped;
  EXPECT_NE(stopped.message().find("step 1: the loss is"), std::string::npos) << stopped;
  EXPECT_EQ(steps_done, 1);

  auto skipping = SerialTrainer::Create(c, huge).value();
  options.skip_nonfinite = true;
  steps_done = 0;
  ASSERT_TRUE(RunTrainingLoop(*skipping, options, on_step, on_note).ok());
  EXPECT_EQ(steps_done, 1);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0], "step 1 skipped: its loss is not finite; the state from before it is "
                      "restored");
  // Step 0's update stays; steps 1 and 2 left no trace: the state is
  // step 0's, the one a run of one step ends with.
  auto one_step = SerialTrainer::Create(c, huge).value();
  Train(*one_step, 0, 1);
  EXPECT_EQ(WorstDifference(skipping->State().value(), one_step->State().value()), 0.0);
  EXPECT_GT(WorstDifference(skipping->State().value(), before), 0.0);
}

// `loom train` killed (SIGKILL) at random moments of a run that saves
// every step: every time, the save directory's newest complete checkpoint
// loads, and training resumes from it.
TEST(Checkpoint, KilledDuringSavesTheLastCompleteOneLoads) {
  const std::string dir = TempDir("killed");
  std::mt19937 random(7);
  int partial_seen = 0;
  int64_t last_step = 0;
  for (int trial = 0; trial < 12; ++trial) {
    const std::string steps = "--steps=100000";
    const std::string save = "--save_dir=" + dir;
    const std::string resume = "--resume=" + dir;
    std::vector<const char*> argv = {LOOM_BIN, "train", steps.c_str(), save.c_str(),
                                     "--save_every=1", "--keep_checkpoints=2"};
    if (trial > 0) argv.push_back(resume.c_str());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    ASSERT_EQ(posix_spawn(&pid, LOOM_BIN, &actions, nullptr, const_cast<char**>(argv.data()),
                          environ),
              0);
    posix_spawn_file_actions_destroy(&actions);
    // The first run is killed only once it has saved a checkpoint: how
    // long it takes to start depends on the build (a sanitizer's) and the
    // host's load, and a kill before any save leaves nothing to load.
    if (trial == 0) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
      while (!LoadCheckpoint(dir).ok() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(300, 700)(random)));
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().filename().string().find(".partial-") != std::string::npos) ++partial_seen;
    }
    auto checkpoint = LoadCheckpoint(dir);
    ASSERT_TRUE(checkpoint.ok()) << "trial " << trial << ": " << checkpoint.status();
    EXPECT_GE(checkpoint->info.step, last_step) << "trial " << trial;
    last_step = checkpoint->info.step;
  }
  EXPECT_GT(last_step, 12);
  std::printf("12 kills, %d during a save (a partial directory left), newest step %lld\n",
              partial_seen, static_cast<long long>(last_step));
  fs::remove_all(dir);
}

TEST(CheckpointCli, SaveResumeAndErrors) {
  const std::string dir = TempDir("cli");
  CliResult r = Loom(StrCat("train --steps 4 --save_dir ", dir, " --save_every 2"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("saved " + dir + "/step-00000002\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("saved " + dir + "/step-00000004\n"), std::string::npos) << r.out;
  r = Loom(StrCat("run --dp 2 --pp 2 --micro_batches 2 --steps 5 --resume ", dir));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("resumed from " + dir + "/step-00000004 at step 4 (saved by serial)\n"
                       "step 4 loss "),
            std::string::npos)
      << r.out;
  r = Loom(StrCat("train --steps 5 --layers 3 --resume ", dir));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(Lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("--resume: " + dir +
                       "/step-00000004: saved by a run with model num_layers = 2, but this "
                       "run has 3"),
            std::string::npos)
      << r.out;
  r = Loom("train --steps 2 --resume /nonexistent-loom-dir");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("--resume: /nonexistent-loom-dir: not a directory"), std::string::npos)
      << r.out;
  r = Loom("train --steps 2 --save_dir /proc/loom-cannot");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("--save_dir: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("step 0"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

// The loss printed after "step K loss ", or NaN.
double LossOf(const std::string& out, int step) {
  const std::string label = StrCat("step ", step, " loss ");
  const size_t at = out.find(label);
  return at == std::string::npos ? NAN : std::atof(out.c_str() + at + label.size());
}

// Under loom launch each process hands its ranks' shards to rank 0's,
// which writes one checkpoint of full tensors; a serial run resumes it on
// serial training's curve.
TEST(CheckpointCli, LaunchedRanksSaveOneCheckpoint) {
  const std::string dir = TempDir("launch");
  CliResult r = Loom(StrCat("launch --nproc 4 -- ", LOOM_BIN, " run --mp 2 --pp 2 "
                            "--micro_batches 2 --steps 3 --save_dir ", dir));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("saved " + dir + "/step-00000003\n"), std::string::npos) << r.out;
  auto checkpoint = LoadCheckpoint(dir);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ(checkpoint->info.layout, "dp=1 mp=2 pp=2 1F1B");
  const CliResult serial = Loom("train --steps 5");
  r = Loom(StrCat("train --steps 5 --resume ", dir));
  ASSERT_EQ(r.code, 0) << r.out;
  for (int s = 3; s < 5; ++s) EXPECT_NEAR(LossOf(r.out, s), LossOf(serial.out, s), 1e-5) << r.out;
  fs::remove_all(dir);
}

// ZeRO under launch: every dp rank hands over its part of each bucket's
// state (under stage 3 its part of the parameters too), and the checkpoint
// is byte for byte that of the run in one process: for stage 1 the
// unsharded run's, for stage 3 (which averages each micro-batch before
// summing) the in-process stage-3 run's.
TEST(CheckpointCli, LaunchedShardedRanksSaveTheUnshardedCheckpoint) {
  for (int stage : {1, 3}) {
    SCOPED_TRACE(StrCat("stage ", stage));
    const std::string sharded = TempDir("launch-sharded"), plain = TempDir("plain");
    const std::string layout = "--dp 2 --pp 2 --micro_batches 2 --steps 3 --save_dir ";
    CliResult r = Loom(StrCat("launch --nproc 4 -- ", LOOM_BIN, " run --sharding_stage ", stage,
                              " ", layout, sharded));
    ASSERT_EQ(r.code, 0) << r.out;
    r = Loom(StrCat("run ", stage == 3 ? "--sharding_stage 3 " : "", layout, plain));
    ASSERT_EQ(r.code, 0) << r.out;
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
      auto a = ReadFile(StrCat(sharded, "/step-00000003/", file));
      auto b = ReadFile(StrCat(plain, "/step-00000003/", file));
      ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
      EXPECT_TRUE(*a == *b) << file << " differs from the run in one process";
    }
    fs::remove_all(sharded);
    fs::remove_all(plain);
  }
}

}  // namespace
}  // namespace loom
