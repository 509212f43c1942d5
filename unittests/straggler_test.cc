// Stragglers (runtime/straggler_watch.h): the rule that names a rank whose
// kernels are consistently slower than its stage's other ranks', and a
// launch in which one rank runs on a slowed core and is named.
#include "runtime/straggler_watch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "framework/status.h"
#include "unittests/loom_cli.h"

namespace loom {
namespace {

TEST(Straggler, NamedAfterTwoSlowWindowsInARowAndOnceUntilItKeepsUp) {
  StragglerWatch watch({0, 0, 0, 0}, StragglerOptions{20, 1.25, 2});
  const std::vector<double> slow = {0.010, 0.011, 0.020, 0.010};
  const std::vector<double> even = {0.010, 0.011, 0.0105, 0.010};
  EXPECT_TRUE(watch.AddWindow(0, 19, slow).empty());
  const std::vector<std::string> named = watch.AddWindow(20, 39, slow);
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0],
            "straggler: rank 2's kernels took a median 20.00 ms per step against 10.00 ms on its "
            "3 peer(s) of the same stage, steps 0-39");
  EXPECT_TRUE(watch.AddWindow(40, 59, slow).empty());  // said once
  EXPECT_TRUE(watch.AddWindow(60, 79, even).empty());  // kept up
  EXPECT_TRUE(watch.AddWindow(80, 99, slow).empty());
  EXPECT_EQ(watch.AddWindow(100, 119, slow).size(), 1u);  // and fell behind again
  // Two peers: theirs is the mean of the two.
  StragglerWatch three({0, 0, 0}, StragglerOptions{20, 1.25, 1});
  const std::vector<std::string> of_three = three.AddWindow(0, 19, {0.030, 0.010, 0.012});
  ASSERT_EQ(of_three.size(), 1u);
  EXPECT_NE(of_three[0].find("rank 0's kernels took a median 30.00 ms per step against 11.00 ms "
                             "on its 2 peer(s)"),
            std::string::npos)
      << of_three[0];
  // One slow window between even ones is noise, not a straggler.
  StragglerWatch noisy({0, 0}, StragglerOptions{20, 1.25, 2});
  for (int w = 0; w < 6; ++w) {
    EXPECT_TRUE(noisy.AddWindow(20 * w, 20 * w + 19, w % 2 ? std::vector<double>{0.03, 0.01}
                                                           : std::vector<double>{0.01, 0.01})
                    .empty());
  }
}

// A last stage with the loss head does more than the first: ranks are
// held only to their own stage's.
TEST(Straggler, StagesAreNotComparedWithEachOther) {
  StragglerWatch watch({0, 0, 1, 1}, StragglerOptions{20, 1.25, 2});
  const std::vector<double> medians = {0.010, 0.010, 0.030, 0.031};
  EXPECT_TRUE(watch.AddWindow(0, 19, medians).empty());
  EXPECT_TRUE(watch.AddWindow(20, 39, medians).empty());
  // A stage of one rank has no peers.
  StragglerWatch alone({0, 1}, StragglerOptions{20, 1.25, 2});
  EXPECT_TRUE(alone.AddWindow(0, 19, {0.01, 0.05}).empty());
  EXPECT_TRUE(alone.AddWindow(20, 39, {0.01, 0.05}).empty());
}

// A CPU cgroup that lets its processes run 1 ms of each 20 ms: a device
// a twentieth as fast, whose kernels stall wherever the quota runs out. cgroup
// v1's cpu controller or v2's cpu.max; empty where neither can be made.
class SlowDeviceGroup {
 public:
  SlowDeviceGroup() {
    const std::string name = StrCat("loom-straggler-", getpid());
    const std::string v1 = "/sys/fs/cgroup/cpu/" + name, v2 = "/sys/fs/cgroup/" + name;
    if (mkdir(v1.c_str(), 0755) == 0) {
      path_ = v1;
      if (!Write("cpu.cfs_period_us", "20000") || !Write("cpu.cfs_quota_us", "1000")) Remove();
    } else if (mkdir(v2.c_str(), 0755) == 0) {
      path_ = v2;
      if (!Write("cpu.max", "1000 20000")) Remove();
    }
  }
  ~SlowDeviceGroup() { Remove(); }
  // Where a process writes its pid to join; empty: no group.
  std::string procs() const { return path_.empty() ? "" : path_ + "/cgroup.procs"; }
  // How often the group was held back (nr_throttled, throttled time): what
  // a failure needs to tell a slow device that was not slow from a watch
  // that did not see it.
  std::string stat() const { return ReadWholeFile(path_ + "/cpu.stat"); }

 private:
  bool Write(const std::string& file, const std::string& value) {
    std::FILE* f = std::fopen((path_ + "/" + file).c_str(), "w");
    if (f == nullptr) return false;
    const bool ok = std::fputs(value.c_str(), f) >= 0;
    return std::fclose(f) == 0 && ok;
  }
  void Remove() {
    if (!path_.empty()) rmdir(path_.c_str());
    path_.clear();
  }
  std::string path_;
};

// Rank 1 of a launch runs on a slow device (SlowDeviceGroup), rank 0 on a
// core of its own: rank 1's kernels take several times as long,
// and the process of rank 0 names it, and only it. The quota stalls the
// thread that is running when its exhaustion is found: at a tick, or at a
// context switch, and a rank's threads switch at every wait. With short
// kernels and many waits the stalls can fall in the waits of a whole
// window, and the slow rank's kernels look no slower than its peer's; 128
// sequences make its kernels outlast the quota's period (the commit that
// set it has the runs).
TEST(Straggler, ALaunchNamesTheRankOnASlowDevice) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "SKIPPED LOUDLY: needs 2 cores";
  SlowDeviceGroup slow;
  if (slow.procs().empty()) {
    GTEST_SKIP() << "SKIPPED LOUDLY: cannot make a CPU cgroup here (needs root and a "
                    "writable cgroup cpu controller)";
  }
  const std::string dir = MakeTempDir("loom_straggler_");
  const std::string rank_script = dir + "/rank.sh";
  WriteWholeFile(rank_script,
                 StrCat("#!/bin/sh\nif [ \"$LOOM_RANK\" = 1 ]; then echo $$ > ", slow.procs(),
                        "; fi\nexec taskset -c $LOOM_RANK ", LOOM_BIN,
                        " run --preset gpt-tiny --mp 2 --batch_size 128 --steps 12 "
                        "--straggler_window 4 --pin_cores=false\n"));
  const CliResult r =
      Shell(StrCat("chmod +x ", rank_script, " && ", LOOM_BIN, " launch --nproc 2 -- ", rank_script));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("loom run: straggler: rank 1's kernels took a median "), std::string::npos)
      << r.out << "the slow device's cpu.stat:\n"
      << slow.stat();
  EXPECT_EQ(r.out.find("straggler: rank 0"), std::string::npos) << r.out;
}

TEST(Straggler, BadFlagsAreNamed) {
  const CliResult r = Loom("run --preset gpt-tiny --steps 1 --straggler_ratio 0.5");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out,
            "loom run: --straggler_window must be 0 or more and --straggler_ratio above 1\n");
}

}  // namespace
}  // namespace loom
