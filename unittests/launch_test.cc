// loom launch never leaves a rank behind: a stopped rank is named by its
// missing heartbeat, a signal to launch stops every rank, and a launch
// killed outright leaves nothing the next one does not clean up.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "unittests/loom_cli.h"

namespace loom {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The last line of `out`.
std::string LastLine(const std::string& out) {
  std::string s = out;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s.substr(s.rfind('\n') == std::string::npos ? 0 : s.rfind('\n') + 1);
}

bool Alive(const std::string& pid_file) {
  const CliResult r = Shell("kill -0 $(cat " + pid_file + ")");
  return r.code == 0;
}

// The processes whose pids `pids`.0 and `pids`.1 hold are gone within 5 s
// (a stopped one continued into its SIGTERM); the files are removed.
void ExpectBothRanksGone(const std::string& pids) {
  for (const char* rank : {".0", ".1"}) {
    for (int i = 0; i < 50 && Alive(pids + rank); ++i) usleep(100000);
    EXPECT_FALSE(Alive(pids + rank)) << "rank" << rank << " survived the launch";
    std::remove((pids + rank).c_str());
  }
}

// A launch environment a command cannot use is named, variable and value,
// in one line: here the shaper's bucket of `loom launch --net_rate`.
TEST(Launch, AMalformedLaunchVariableIsNamed) {
  const CliResult r = Loom("profile --comm", "LOOM_RANK=0 LOOM_WORLD_SIZE=2 LOOM_STORE_DIR=/tmp "
                                             "LOOM_NET_BURST_BYTES=lots");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("LOOM_NET_BURST_BYTES='lots' is not a positive byte count"),
            std::string::npos) << r.out;
  EXPECT_EQ(Lines(r.out), 1) << r.out;
}

// Rank 1's training process is stopped (SIGSTOP) two seconds in; it waits
// in no collective, so only its silence tells. The launch names it after
// --heartbeat_timeout, not after a peer's 60 s collective timeout, and
// leaves no process behind.
TEST(Launch, AStoppedRankIsNamedByItsHeartbeat) {
  const std::string pids = ::testing::TempDir() + "/loom_launch_stopped." + std::to_string(getpid());
  const auto start = std::chrono::steady_clock::now();
  const CliResult r = Loom(
      "launch --nproc 2 --heartbeat_timeout 2 -- sh -c '" + std::string(LOOM_BIN) +
      " run --preset gpt-tiny --dp 2 --steps 1000000 > /dev/null & p=$!; echo $p > " + pids +
      ".$LOOM_RANK; if [ $LOOM_RANK = 1 ]; then sleep 2; kill -STOP $p; fi; wait $p'");
  const double seconds = SecondsSince(start);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(LastLine(r.out).find("loom launch: rank 1 (pid "), std::string::npos) << r.out;
  EXPECT_NE(LastLine(r.out).find(") renewed no heartbeat for 2 s: stopped or hung"),
            std::string::npos)
      << r.out;
  EXPECT_LT(seconds, 20.0) << r.out;
  ExpectBothRanksGone(pids);
}

// Rank 1 stops itself (SIGSTOP) before its loom command starts, so it never
// writes a heartbeat; rank 0's loom beats and waits for it at rendezvous.
// The launch names rank 1 --heartbeat_timeout after it started, instead of
// skipping a rank with no heartbeat file, and leaves nothing behind.
TEST(Launch, ARankStoppedBeforeItsFirstHeartbeatIsNamed) {
  const std::string pids = ::testing::TempDir() + "/loom_launch_early." + std::to_string(getpid());
  const auto start = std::chrono::steady_clock::now();
  const CliResult r = Loom("launch --nproc 2 --heartbeat_timeout 2 -- sh -c 'echo $$ > " + pids +
                           ".$LOOM_RANK; if [ $LOOM_RANK = 1 ]; then kill -STOP $$; fi; exec " +
                           std::string(LOOM_BIN) +
                           " run --preset gpt-tiny --dp 2 --steps 1000000 > /dev/null'");
  const double seconds = SecondsSince(start);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(LastLine(r.out).find("loom launch: rank 1 (pid "), std::string::npos) << r.out;
  EXPECT_NE(LastLine(r.out).find(
                ") wrote no heartbeat in the 2 s since it started: stopped or hung"),
            std::string::npos)
      << r.out;
  EXPECT_LT(seconds, 20.0) << r.out;
  ExpectBothRanksGone(pids);
}

// A command that is not loom's writes no heartbeat, and is not stopped for it.
TEST(Launch, OtherCommandsAreNotHeldToAHeartbeat) {
  const CliResult r = Loom("launch --nproc 2 --heartbeat_timeout 1 -- sh -c 'sleep 2.5'");
  EXPECT_EQ(r.code, 0) << r.out;
}

// SIGTERM to launch stops both ranks (it forwards it) and removes the
// rendezvous directory; launch names the signal.
TEST(Launch, ASignalStopsEveryRankAndCleansUp) {
  const std::string tag = ::testing::TempDir() + "/loom_launch_term." + std::to_string(getpid());
  const CliResult r = Shell(
      "(" + std::string(LOOM_BIN) + " launch --nproc 2 -- sh -c 'echo $$ > " + tag +
      ".$LOOM_RANK; echo $LOOM_STORE_DIR > " + tag +
      ".dir; sleep 60' & l=$!; sleep 1; kill -TERM $l; wait $l)");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("interrupted by signal 15"), std::string::npos) << r.out;
  for (const char* rank : {".0", ".1"}) {
    for (int i = 0; i < 50 && Alive(tag + rank); ++i) usleep(100000);
    EXPECT_FALSE(Alive(tag + rank)) << "rank" << rank << " survived the launch";
    std::remove((tag + rank).c_str());
  }
  const CliResult dir = Shell("cat " + tag + ".dir");
  std::string path = dir.out;
  while (!path.empty() && path.back() == '\n') path.pop_back();
  EXPECT_FALSE(path.empty());
  EXPECT_FALSE(std::filesystem::exists(path)) << path;
  std::remove((tag + ".dir").c_str());
}

// SIGKILL cannot be caught: the ranks die with launch (a parent-death
// signal to each rank's process; what a rank itself starts is its own to
// stop, as a loom rank's threads die with it), and the next launch removes
// the directory it left.
TEST(Launch, AKilledLaunchLeavesNothingBehind) {
  const std::string tag = ::testing::TempDir() + "/loom_launch_kill." + std::to_string(getpid());
  Shell("(" + std::string(LOOM_BIN) + " launch --nproc 1 -- sh -c 'echo $$ > " + tag +
        ".0; echo $LOOM_STORE_DIR > " + tag +
        ".dir; exec sleep 60' & l=$!; "
        // Killed once the rank is up (a loaded host may take over a second).
        "for i in $(seq 200); do [ -s " + tag + ".dir ] && break; sleep 0.05; done; "
        "kill -KILL $l; wait $l)");
  for (int i = 0; i < 50 && Alive(tag + ".0"); ++i) usleep(100000);
  EXPECT_FALSE(Alive(tag + ".0")) << "the rank survived its launch";
  std::string path = Shell("cat " + tag + ".dir").out;
  while (!path.empty() && path.back() == '\n') path.pop_back();
  ASSERT_FALSE(path.empty());
  // Any launch removes the directories of launches that are gone, so a
  // launch of a test running beside this one (ctest -j) may have done it.
  if (!std::filesystem::exists(path)) {
    std::printf("the killed launch's %s was already removed by another launch\n", path.c_str());
  }
  EXPECT_EQ(Loom("launch --nproc 1 -- true").code, 0);
  EXPECT_FALSE(std::filesystem::exists(path)) << path;
  std::remove((tag + ".0").c_str());
  std::remove((tag + ".dir").c_str());
}

}  // namespace
}  // namespace loom
