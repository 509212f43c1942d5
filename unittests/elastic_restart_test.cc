// loom launch --max_restarts: a rank that dies or stops mid-run makes the
// launch stop every rank and start them all again, and a restarted
// `loom run` resumes from the newest complete checkpoint of its --save_dir,
// ending with the parameters and optimizer state of a run never
// interrupted, byte for byte.
#include <string>

#include <gtest/gtest.h>

#include "framework/status.h"
#include "unittests/loom_cli.h"

namespace loom {
namespace {

// Steps long enough (64 sequences), and enough of them after step 2's
// checkpoint, that the run is still going when the signal comes: with 8
// steps of a few ms, a busy host's slower looks for the checkpoint
// sometimes came after the run had ended.
constexpr int kSteps = 16;
std::string RunFlags() {
  return StrCat(" run --preset gpt-tiny --batch_size 64 --mp 2 --steps ", kSteps,
                " --save_every 2 --save_dir ");
}
std::string LastCheckpoint() { return StrCat("/step-000000", kSteps, "/"); }

// The launch of `launch_flags` over two ranks, with `signal` sent to its
// second rank once step 2's checkpoint is saved.
CliResult LaunchAndSignal(const std::string& launch_flags, const std::string& save_dir,
                          const std::string& signal) {
  const std::string out = save_dir + ".out";
  const CliResult r = Shell(
      StrCat(LOOM_BIN, " launch --nproc 2 ", launch_flags, " -- ", LOOM_BIN, RunFlags(), save_dir,
             " > ", out, " 2>&1 & L=$!; for i in $(seq 1500); do grep -q 'saved .*step-00000002' ",
             out, " && break; sleep 0.02; done; kill -", signal,
             " $(pgrep -P $L | tail -1); wait $L; "
             "echo launch exit $?"));
  return {r.code, ReadWholeFile(out) + r.out};
}

void ExpectSameCheckpoint(const std::string& a, const std::string& b) {
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    const std::string saved = ReadWholeFile(StrCat(a, LastCheckpoint(), file));
    EXPECT_FALSE(saved.empty()) << a << " " << file;
    EXPECT_TRUE(saved == ReadWholeFile(StrCat(b, LastCheckpoint(), file)))
        << file << " differs from the uninterrupted run's";
  }
}

class ElasticRestart : public ::testing::Test {
 protected:
  void SetUp() override {
    whole_ = MakeTempDir("loom_whole_");
    const CliResult whole = Loom(StrCat("launch --nproc 2 -- ", LOOM_BIN, RunFlags(), whole_));
    ASSERT_EQ(whole.code, 0) << whole.out;
    whole_losses_ = LossLines(whole.out);
    ASSERT_EQ(whole_losses_.size(), static_cast<size_t>(kSteps)) << whole.out;
  }
  std::string whole_;
  std::vector<std::string> whole_losses_;
};

// SIGKILL to a rank after step 2's checkpoint: one restart, from the
// newest checkpoint, to the same last steps and the same state at the last.
TEST_F(ElasticRestart, AKilledRankRestartsFromTheNewestCheckpoint) {
  const std::string dir = MakeTempDir("loom_killed_");
  const CliResult r = LaunchAndSignal("--max_restarts 2", dir, "KILL");
  EXPECT_NE(r.out.find("launch exit 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("loom launch: restart 1 of 2, after: rank 1 was killed by signal 9"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("resumed from " + dir + "/step-0000000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("loom launch: finished after 1 restart(s)"), std::string::npos) << r.out;
  // Every step the restarted run took is the uninterrupted run's.
  const std::vector<std::string> losses = LossLines(r.out);
  ASSERT_GE(losses.size(), static_cast<size_t>(kSteps)) << r.out;
  for (size_t i = losses.size() - 4; i < losses.size(); ++i) {
    EXPECT_EQ(losses[i], whole_losses_[i - (losses.size() - kSteps)]) << r.out;
  }
  ExpectSameCheckpoint(dir, whole_);
}

// SIGSTOP: the rank renews no heartbeat, is named, and the group restarts.
TEST_F(ElasticRestart, AStoppedRankIsNamedAndTheGroupRestarts) {
  const std::string dir = MakeTempDir("loom_stopped_");
  const CliResult r = LaunchAndSignal("--max_restarts 1 --heartbeat_timeout 2", dir, "STOP");
  EXPECT_NE(r.out.find("launch exit 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("loom launch: restart 1 of 1, after: rank 1 (pid "), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("renewed no heartbeat for 2 s: stopped or hung"), std::string::npos)
      << r.out;
  ExpectSameCheckpoint(dir, whole_);
}

TEST(ElasticRestartFlags, RestartsRunOutAndBadCountsAreNamed) {
  const CliResult never = Loom("launch --nproc 2 --max_restarts 2 -- /bin/false");
  EXPECT_EQ(never.code, 1);
  // Both ranks fail at once; whichever the launcher sees first is named.
  EXPECT_TRUE(never.out.find("loom launch: restart 1 of 2, after: rank 0 exited with status 1") !=
                  std::string::npos ||
              never.out.find("loom launch: restart 1 of 2, after: rank 1 exited with status 1") !=
                  std::string::npos)
      << never.out;
  EXPECT_NE(never.out.find("loom launch: restart 2 of 2"), std::string::npos) << never.out;
  EXPECT_EQ(never.out.find("restart 3"), std::string::npos) << never.out;
  EXPECT_NE(never.out.find("loom launch: failed after 2 restart(s)"), std::string::npos)
      << never.out;
  const CliResult none = Loom("launch --nproc 2 -- /bin/false");
  EXPECT_EQ(none.code, 1);
  EXPECT_EQ(none.out.find("restart"), std::string::npos) << none.out;
  const CliResult bad = Loom("launch --nproc 2 --max_restarts -1 -- /bin/true");
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.out, "loom launch: --max_restarts -1 is outside 0..1000\n");
}

}  // namespace
}  // namespace loom
