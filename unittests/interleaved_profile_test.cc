// loom run --interleaved_profile, as the accuracy script runs it: the
// op costs it times between a run's steps match loom profile's, and the
// cluster file a run writes (--interleaved_cluster_out) records what it
// measured, in one process and under loom launch; and the cluster file
// loom profile --plan writes (--cluster_out) with its steps' lockstep.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "cost_model/cluster.h"
#include "cost_model/cost_table.h"
#include "executor/cpu/host_threads.h"
#include "framework/status.h"
#include "unittests/loom_cli.h"

namespace loom {
namespace {

using Result = CliResult;

// loom run --interleaved_profile times the plan's ops between the run's
// steps: the same signatures as loom profile --plan, each sampled in every
// step after the warm-up, in one process and under loom launch.
TEST(InterleavedProfile, InterleavedWithARunTimesWhatLoomProfileDoes) {
  const std::string dir = MakeTempDir("loom_profile_interleaved");
  const std::string plan = dir + "/p.plan";
  ASSERT_EQ(Loom("plan --preset gpt-tiny --layers 2 --mp 2 --pp 2 --micro_batches 2 "
                 "--schedule 1F1B -o " + plan).code, 0);
  Result separate = Loom("profile --plan " + plan + " --cost_table " + dir + "/separate.pbtxt" +
                         kFastProfileFlags);
  ASSERT_EQ(separate.code, 0) << separate.out;
  auto step_entries = [](const std::string& path) {
    std::map<std::string, int> samples;
    const CostTable table = CostTable::Load(path).value();
    for (const proto::CostEntry& e : table.proto().entry()) {
      if (e.context() == "step") samples[e.signature()] = e.samples();
    }
    return samples;
  };
  const std::map<std::string, int> expected = step_entries(dir + "/separate.pbtxt");
  ASSERT_FALSE(expected.empty());

  const std::string table = dir + "/interleaved.pbtxt";
  Result run = Loom("run --plan " + plan + " --steps 4 --profile_warmup 1 "
                    "--interleaved_profile --cost_table " + table);
  ASSERT_EQ(run.code, 0) << run.out;
  EXPECT_NE(run.out.find("step 3 loss "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("signatures in steps between the run's: " +
                         std::to_string(expected.size()) + " added, 0 replaced"),
            std::string::npos) << run.out;
  const std::map<std::string, int> interleaved = step_entries(table);
  ASSERT_EQ(interleaved.size(), expected.size());
  for (const auto& [signature, samples] : interleaved) {
    EXPECT_TRUE(expected.count(signature)) << signature;
    // 3 sampled steps, each a sample of every copy that ran the op.
    EXPECT_GT(samples, 0) << signature;
    EXPECT_EQ(samples % 3, 0) << samples << " samples of " << signature;
  }
  Result sim = Loom("simulate --plan " + plan + " --cost_table " + table);
  ASSERT_EQ(sim.code, 0) << sim.out;
  EXPECT_NE(sim.out.find(" profiled, 0 scaled, 0 roofline)"), std::string::npos) << sim.out;

  // Under loom launch the process of rank 0 profiles and writes the table.
  const std::string launched = dir + "/launched.pbtxt";
  Result launch = Loom("launch --nproc 4 -- " + std::string(LOOM_BIN) + " run --plan " + plan +
                       " --steps 3 --profile_warmup 1 --interleaved_profile --cost_table " +
                       launched);
  ASSERT_EQ(launch.code, 0) << launch.out;
  EXPECT_EQ(step_entries(launched).size(), expected.size()) << launch.out;

  Result few = Loom("run --plan " + plan + " --steps 2 --interleaved_profile --cost_table " +
                    table);
  EXPECT_EQ(few.code, 1);
  EXPECT_EQ(few.out, "loom run: --interleaved_profile needs more --steps (2) than "
                     "--profile_warmup (2)\n");
}

// In one process a run can also time the wait for busy cores between its
// steps: it writes its cluster with that core_wait, the lockstep slowdown
// of its profile, and the rest kept. With core_wait, four ranks on two
// cores get no shared cores' lockstep: the simulator would not use it.
TEST(InterleavedProfile, InterleavedCoreWaitWritesTheRunsCluster) {
  const std::string dir = MakeTempDir("loom_profile_core_wait");
  const std::string plan = dir + "/p.plan";
  ASSERT_EQ(Loom("plan --preset gpt-tiny --layers 2 --mp 2 --pp 2 --micro_batches 2 -o " + plan)
                .code,
            0);
  const std::string run = "run --plan " + plan + " --steps 3 --profile_warmup 1 " +
                          "--interleaved_profile --cost_table " + dir + "/t.pbtxt ";
  const std::string out = dir + "/run.cluster.pbtxt";
  Result r = Loom(run + "--interleaved_core_wait_calls 4 --interleaved_cluster_out " + out);
  if (CoresOfThisProcess().size() < 2) {
    std::printf("SKIPPED: this process may use fewer than 2 cores\n");
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.out.find("needs 2 ranks on cores of their own"), std::string::npos) << r.out;
    return;
  }
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("core wait: allreduce of 16384 B on 2 pinned ranks, medians of 4 calls "
                       "after each of 2 steps"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  beside compute that never pauses "), std::string::npos) << r.out;
  auto c = LoadCluster(out);
  ASSERT_TRUE(c.ok()) << c.status();
  const proto::Cluster local = LoadCluster("local").value();
  EXPECT_EQ(c->intra_node().SerializeAsString(), local.intra_node().SerializeAsString());
  // ... and the lockstep slowdown its profile's copies on the two cores gave.
  EXPECT_TRUE(c->shared_host().has_lockstep_slowdown());
  char said[128];
  std::snprintf(said, sizeof(said),
                "lockstep: ranks meeting after each stretch of compute on 2 cores would take "
                "%.1f%% longer",
                (c->shared_host().lockstep_slowdown() - 1) * 100);
  EXPECT_NE(r.out.find(said), std::string::npos) << r.out;
  EXPECT_FALSE(c->shared_host().has_shared_core_lockstep());
  EXPECT_EQ(r.out.find("lockstep on shared cores"), std::string::npos) << r.out;
  // (Unless the fit is too far from its samples, which it says.)
  if (r.out.find("core wait: not recorded") == std::string::npos) {
    EXPECT_NE(c->shared_host().core_wait().source().find("loom run --interleaved_profile"),
              std::string::npos)
        << c->shared_host().core_wait().source();
    EXPECT_GT(c->shared_host().core_wait().slice_seconds(), 0);
  } else {
    EXPECT_EQ(c->shared_host().core_wait().SerializeAsString(),
              local.shared_host().core_wait().SerializeAsString());
  }

  Result alone = Loom(run + "--interleaved_core_wait_calls 4");
  EXPECT_EQ(alone.out, "loom run: --interleaved_core_wait_calls needs --interleaved_cluster_out, "
                       "the cluster file its fit is written to\n");
  Result unprofiled = Loom("run --plan " + plan + " --steps 3 --interleaved_core_wait_calls 4 "
                           "--interleaved_cluster_out " + out);
  EXPECT_EQ(unprofiled.out, "loom run: --interleaved_core_wait_calls needs "
                            "--interleaved_profile\n");
  Result launched = Loom("launch --nproc 4 -- " + std::string(LOOM_BIN) + " " + run +
                         "--interleaved_core_wait_calls 4 --interleaved_cluster_out " + out);
  EXPECT_NE(launched.code, 0);
  EXPECT_NE(launched.out.find("in one process only, not under loom launch"), std::string::npos)
      << launched.out;
}

// Under loom launch, rank 0's process writes the cluster the run was
// given with the shared cores' lockstep its profile measured (four ranks
// on two cores), and nothing else changed: the emulated rows are
// simulated with it. The two-core lockstep is said, not written.
TEST(InterleavedProfile, LaunchedRunWritesItsLockstepSlowdowns) {
  const std::string dir = MakeTempDir("loom_profile_launched_lockstep");
  const std::string plan = dir + "/p.plan";
  ASSERT_EQ(Loom("plan --preset gpt-tiny --layers 2 --mp 2 --pp 2 --micro_batches 2 -o " + plan).code, 0);
  const std::string out = dir + "/run.cluster.pbtxt";
  Result r = Loom("launch --nproc 4 -- " + std::string(LOOM_BIN) + " run --plan " + plan +
                  " --steps 3 --profile_warmup 1 --interleaved_profile --cost_table " + dir +
                  "/t.pbtxt --cluster emulated --interleaved_cluster_out " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  auto c = LoadCluster(out);
  ASSERT_TRUE(c.ok()) << c.status();
  proto::Cluster expected = LoadCluster("emulated").value();
  if (CoresOfThisProcess().size() < 2) {
    std::printf("SKIPPED: one core gives no lockstep slowdown; the cluster is written as given\n");
    EXPECT_FALSE(c->shared_host().has_lockstep_slowdown());
  } else {
    EXPECT_FALSE(c->shared_host().has_lockstep_slowdown());
    ASSERT_TRUE(c->shared_host().has_shared_core_lockstep()) << r.out;
    EXPECT_NE(r.out.find("lockstep: ranks meeting after each stretch of compute on 2 cores"),
              std::string::npos) << r.out;
    char said[128];
    std::snprintf(said, sizeof(said),
                  "lockstep on shared cores: with two ranks on each core, %.1f%% longer",
                  (c->shared_host().shared_core_lockstep() - 1) * 100);
    EXPECT_NE(r.out.find(said), std::string::npos) << r.out;
    expected.mutable_shared_host()->set_shared_core_lockstep(
        c->shared_host().shared_core_lockstep());
  }
  EXPECT_EQ(c->SerializeAsString(), expected.SerializeAsString());
}

// loom profile --plan --cluster_out writes the cluster given with the
// shared cores' lockstep its steps measured, where the plan pins two ranks
// to a core, and nothing else changed; a plan with a core for each rank
// gets the cluster as given, and says why. Only a plan's steps measure it.
TEST(InterleavedProfile, ProfileOfAPlanWritesItsSharedCoresLockstep) {
  const std::string dir = MakeTempDir("loom_profile_plan_lockstep");
  const std::string four = dir + "/four.plan", two = dir + "/two.plan";
  ASSERT_EQ(
      Loom("plan --preset gpt-tiny --layers 2 --mp 2 --pp 2 --micro_batches 2 -o " + four).code, 0);
  ASSERT_EQ(Loom("plan --preset gpt-tiny --layers 2 --pp 2 --micro_batches 2 -o " + two).code, 0);
  const std::vector<int> cores = CoresOfThisProcess();
  if (cores.size() < 2) {
    std::printf("SKIPPED: this process may use fewer than 2 cores: no lockstep to measure\n");
    return;
  }
  // Kept to two cores, whatever the host has: four ranks, two to a core.
  const std::string on_two_cores =
      StrCat("taskset -c ", cores[0], ",", cores[1], " ", LOOM_BIN, " profile", kFastProfileFlags,
             " --cost_table ", dir, "/t.pbtxt --cluster local --cluster_out ", dir, "/");
  const proto::Cluster local = LoadCluster("local").value();

  Result shared = Shell(on_two_cores + "four.cluster.pbtxt --plan " + four);
  ASSERT_EQ(shared.code, 0) << shared.out;
  auto c = LoadCluster(dir + "/four.cluster.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->shared_host().has_shared_core_lockstep()) << shared.out;
  char said[128];
  std::snprintf(said, sizeof(said),
                "lockstep on shared cores: with two ranks on each core, %.1f%% longer",
                (c->shared_host().shared_core_lockstep() - 1) * 100);
  EXPECT_NE(shared.out.find(said), std::string::npos) << shared.out;
  proto::Cluster expected = local;
  expected.mutable_shared_host()->set_shared_core_lockstep(c->shared_host().shared_core_lockstep());
  EXPECT_EQ(c->SerializeAsString(), expected.SerializeAsString());

  Result apart = Shell(on_two_cores + "two.cluster.pbtxt --plan " + two);
  ASSERT_EQ(apart.code, 0) << apart.out;
  EXPECT_NE(apart.out.find("no shared cores' lockstep: the plan has no more ranks than this "
                           "host has cores"),
            std::string::npos)
      << apart.out;
  auto as_given = LoadCluster(dir + "/two.cluster.pbtxt");
  ASSERT_TRUE(as_given.ok()) << as_given.status();
  EXPECT_EQ(as_given->SerializeAsString(), local.SerializeAsString());

  Result alone = Loom("profile --preset gpt-tiny --layers 1 --in_step=false --cost_table " + dir +
                      "/t.pbtxt --cluster_out " + dir + "/alone.cluster.pbtxt");
  EXPECT_EQ(alone.code, 1);
  EXPECT_EQ(Lines(alone.out), 1) << alone.out;
  EXPECT_NE(alone.out.find("--cluster_out with ops: the cores' lockstep is measured in a plan's "
                           "steps"),
            std::string::npos)
      << alone.out;
}

}  // namespace
}  // namespace loom
