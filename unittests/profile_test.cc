// loom profile, run as a user runs it, and the op profiler beneath it:
// the table it writes covers the program, reads back as profiled costs,
// and merges on a second run; --comm writes a valid cluster file.

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "cost_model/cluster.h"
#include "cost_model/cost_table.h"
#include "cost_model/op_cost_model.h"
#include "executor/comm/gloo_communicator.h"
#include "executor/cpu/cpu_device.h"
#include "executor/cpu/host_threads.h"
#include "framework/median.h"
#include "framework/op_builder.h"
#include "framework/shape_inference.h"
#include "models/gpt.h"
#include "passes/strategy.h"
#include "profiling/cache_profile.h"
#include "profiling/op_profiler.h"
#include "profiling/step_profiler.h"
#include "runtime/gpt_plan.h"
#include "unittests/loom_cli.h"
#include "unittests/test_plan_options.h"

namespace loom {
namespace {

using Result = CliResult;

TEST(Profile, GptTinyTableCoversTheProgramAndMerges) {
  const std::string table_path = MakeTempDir("loom_profile") + "/table.pbtxt";
  const std::string args = "profile --preset gpt-tiny --layers 1 --cost_table " +
                           table_path + kFastProfileFlags;
  Result first = Loom(args);
  ASSERT_EQ(first.code, 0) << first.out;
  // The serial layout is one rank, timed in its steps: every op computes.
  EXPECT_NE(first.out.find("timing rank 0 (dp=0 mp=0 pp=0) in steps, in turns: 1 + 3 steps\n"
                                  "[step 1/4] ...\n"), std::string::npos)
      << first.out;
  EXPECT_NE(first.out.find(" alone, 0 skipped)"), std::string::npos) << first.out;

  GptConfig config = GptPreset("gpt-tiny").value();
  config.num_layers = 1;
  TrainingProgram tp = BuildGptTrainingProgram(config).value();
  const Block& block = tp.main.global_block();
  const CostTable table = CostTable::Load(table_path).value();
  std::set<std::string> signatures;
  for (const Op* op : block.ops()) signatures.insert(OpSignature(*op));
  EXPECT_EQ(table.size(), static_cast<int>(signatures.size()));
  EXPECT_NE(first.out.find(StrCat(signatures.size(), " added, 0 replaced")),
            std::string::npos) << first.out;

  // Every op is priced by its own entry, at exactly the entry's median.
  OpCostModel model(LoadCluster("local").value(), table);
  for (const Op* op : block.ops()) {
    const proto::CostEntry* e = table.Find(OpSignature(*op), "local");
    ASSERT_NE(e, nullptr) << OpSignature(*op);
    EXPECT_EQ(e->op_type(), op->type());
    EXPECT_EQ(e->flops(), WorkOf(*op).flops);
    EXPECT_EQ(e->samples(), 3);
    EXPECT_EQ(e->context(), "step");
    OpCost c = model.EstimateOp(*op).value();
    EXPECT_EQ(c.rule, CostRule::kProfiled) << op->Location();
    EXPECT_EQ(c.seconds, e->median_seconds()) << op->Location();
    EXPECT_GT(c.seconds, 0);
  }

  // A second profile replaces every entry and adds none.
  Result second = Loom(args);
  ASSERT_EQ(second.code, 0) << second.out;
  EXPECT_NE(second.out.find(StrCat("0 added, ", signatures.size(), " replaced")),
            std::string::npos) << second.out;
  EXPECT_EQ(CostTable::Load(table_path).value().size(), table.size());

  // A larger program merges into the same file: only its new signatures
  // are added.
  Result two_layers = Loom("profile --preset gpt-tiny --layers 2 --cost_table " +
                           table_path + kFastProfileFlags);
  ASSERT_EQ(two_layers.code, 0) << two_layers.out;
  EXPECT_GE(CostTable::Load(table_path).value().size(), table.size());
}

// A layout runs shapes the serial program does not have (micro-batch
// slices, tensor-parallel shards, accumulation): profiling the layout's
// plan covers every op its simulation prices, the vocabulary-parallel cross
// entropy's compute included; only pure communication is left out.
TEST(Profile, LayoutPlanCoversEveryOpItsSimulationPrices) {
  const std::string table = MakeTempDir("loom_profile_layout") + "/table.pbtxt";
  const std::string layout =
      "--preset gpt-tiny --layers 2 --mp 2 --pp 2 --micro_batches 2 --schedule 1F1B";
  Result profile = Loom("profile " + layout + " --cost_table " + table + kFastProfileFlags);
  ASSERT_EQ(profile.code, 0) << profile.out;
  EXPECT_NE(profile.out.find("at dp=1 mp=2 pp=2, 1F1B over 2 micro-batches"),
            std::string::npos) << profile.out;

  EXPECT_NE(profile.out.find("sum of medians over rank 3's (dp=0 mp=1 pp=1) "),
            std::string::npos) << profile.out;
  // Every skipped op only communicates.
  for (size_t at = profile.out.find("skipped "); at != std::string::npos;
       at = profile.out.find("skipped ", at + 1)) {
    const std::string line = profile.out.substr(at, profile.out.find('\n', at) - at);
    if (line.find("skipped)") != std::string::npos) continue;  // the summary
    EXPECT_NE(line.find(": communicates"), std::string::npos) << line;
    EXPECT_TRUE(line.find("skipped allreduce ") == 0 || line.find("skipped send ") == 0 ||
                line.find("skipped recv ") == 0) << line;
  }
  // The vocabulary-parallel cross entropy computes too: timed in the step,
  // without its reductions.
  {
    const CostTable t = CostTable::Load(table).value();
    int found = 0;
    for (const proto::CostEntry& e : t.proto().entry()) {
      if (e.op_type() != "c_softmax_with_cross_entropy") continue;
      ++found;
      EXPECT_EQ(e.context(), "step");
      EXPECT_GT(e.median_seconds(), 0);
    }
    EXPECT_EQ(found, 2);  // one signature per tensor-parallel rank (its `rank` attribute)
  }
  Result sim = Loom("simulate " + layout + " --cost_table " + table);
  ASSERT_EQ(sim.code, 0) << sim.out;
  EXPECT_NE(sim.out.find(" profiled, 0 scaled, 0 roofline)"), std::string::npos) << sim.out;

  // A saved plan profiles to the same signatures: nothing new is added.
  const std::string plan = MakeTempDir("loom_profile_plan") + "/p.plan";
  ASSERT_EQ(Loom("plan " + layout + " -o " + plan).code, 0);
  Result saved = Loom("profile --plan " + plan + " --cost_table " + table + kFastProfileFlags);
  ASSERT_EQ(saved.code, 0) << saved.out;
  EXPECT_NE(saved.out.find(" 0 added, "), std::string::npos) << saved.out;

  Result mixed = Loom("profile --program x.pbtxt --dp 2 --cost_table " + table);
  EXPECT_EQ(mixed.code, 1);
  EXPECT_EQ(mixed.out, "loom profile: --program times one program; --plan and the layout "
                       "flags (--dp, --mp, --pp, ...) plan a preset instead\n");
}

// --in_step=false times the same signatures one op at a time; a program
// file has no plan to run, so its ops are always timed alone.
// The cluster file --calibrate_device writes names the host it measured
// (as /proc/cpuinfo does), not the host of the preset it started from.
TEST(Profile, CalibratedClusterNamesTheHostItMeasured) {
  const std::string dir = MakeTempDir("calibrate");
  Result r = Loom("profile --calibrate_device --calibrate_seconds 0 --cluster_out " + dir +
                  "/c.pbtxt");
  ASSERT_EQ(r.code, 0) << r.out;
  const proto::Cluster c = LoadCluster(dir + "/c.pbtxt").value();
  std::string cpu = Shell("grep -m1 '^model name' /proc/cpuinfo | sed 's/^[^:]*: *//'").out;
  while (!cpu.empty() && cpu.back() == '\n') cpu.pop_back();
  if (cpu.empty()) {
    EXPECT_FALSE(c.device().has_model()) << c.device().model();
  } else {
    EXPECT_EQ(c.device().model(), StrCat(cpu, ", ", c.device().cores(), " cores"));
  }
}

TEST(Profile, AloneTimesEachOpInALoop) {
  const std::string dir = MakeTempDir("loom_profile_alone");
  Result r = Loom("profile --preset gpt-tiny --layers 1 --in_step=false --cost_table " + dir +
                  "/t.pbtxt" + kFastProfileFlags);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("] lookup_table fp32[128, 64] int64[8, 32] -> fp32[8, 32, 64] ..."),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(0 in steps, "), std::string::npos) << r.out;
  const CostTable table = CostTable::Load(dir + "/t.pbtxt").value();
  for (const proto::CostEntry& e : table.proto().entry()) {
    EXPECT_EQ(e.context(), "alone") << e.signature();
  }
}

TEST(Profile, ProgramFileAndTheDefaultTableLocation) {
  const std::string dir = MakeTempDir("loom_profile_program");
  ASSERT_EQ(Loom("model --preset gpt-tiny --layers 1 -o " + dir + "/p.pbtxt").code, 0);
  // No --cost_table: $LOOM_COST_TABLE decides.
  Result r = Loom("profile --program " + dir + "/p.pbtxt" + kFastProfileFlags,
                  "LOOM_COST_TABLE=" + dir + "/env.pbtxt");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("wrote " + dir + "/env.pbtxt"), std::string::npos) << r.out;
  EXPECT_GT(CostTable::Load(dir + "/env.pbtxt").value().size(), 20);
}

// In-step profiling runs copies of each timed rank side by side, one per
// core: every signature is timed as alone, with a sample per copy and step,
// and the copies' stretches of compute give the cores' lockstep slowdown.
TEST(Profile, InStepRunsCopiesOfARankSideBySide) {
  if (CoresOfThisProcess().size() < 2) GTEST_SKIP() << "needs 2 cores, this process has 1";
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 1;
  const Plan plan =
      PlanGpt(c, OptimizerConfig(), MakeStrategy(2, 1, 1, 1, "1F1B"), {}, LocalPlanOptions())
          .value();
  auto profile = [&](int side_by_side) {
    StepProfileOptions o;
    o.warmup_steps = 1;
    o.steps = 3;
    o.side_by_side = side_by_side;
    std::map<std::string, int> samples;
    auto profiler = InStepProfiler::Create(c, plan, o).value();
    for (int step = 0; step < o.warmup_steps + o.steps; ++step) {
      EXPECT_TRUE(profiler->Step(step).ok());
    }
    for (const OpTiming& t : profiler->Timings()) {
      EXPECT_GT(t.median_seconds, 0) << t.signature;
      samples[t.signature] = t.samples;
    }
    // Copies on two cores say how much the slower core's stretches of
    // compute add: never less than their mean, and never more than the
    // copies' count times it (the slowest of N is at most their sum). How
    // far between is the host's, not the code's: under ctest -j2 a test
    // beside it took a core and the ratio reached 1.54 on a clean clone.
    const std::optional<double> lockstep = profiler->LockstepSlowdown();
    EXPECT_EQ(lockstep.has_value(), side_by_side > 1);
    if (lockstep) {
      EXPECT_GE(*lockstep, 1.0);
      EXPECT_LE(*lockstep, static_cast<double>(side_by_side));
    }
    return samples;
  };
  const std::map<std::string, int> alone = profile(1), two = profile(2);
  ASSERT_FALSE(alone.empty());
  ASSERT_EQ(alone.size(), two.size());
  for (const auto& [signature, n] : alone) {
    EXPECT_EQ(n, 3) << signature;
    ASSERT_EQ(two.count(signature), 1u) << signature;
    EXPECT_EQ(two.at(signature), 6) << signature;
  }
}

// Where the plan has more ranks than the copies have cores, the first
// sampled steps run again with a second copy on each core: the shared
// cores' lockstep, while the op timings keep to the copies with a core
// each. With no more ranks than cores, or no such steps, none is measured.
TEST(Profile, InStepMeasuresTheLockstepOfRanksSharingCores) {
  if (CoresOfThisProcess().size() < 2) GTEST_SKIP() << "needs 2 cores, this process has 1";
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 1;
  auto profile = [&](int dp, int shared_core_steps) {
    const Plan plan =
        PlanGpt(c, OptimizerConfig(), MakeStrategy(dp, 1, 1, 1, "1F1B"), {}, LocalPlanOptions())
            .value();
    StepProfileOptions o;
    o.warmup_steps = 1;
    o.steps = 3;
    o.side_by_side = 2;
    o.shared_core_steps = shared_core_steps;
    auto profiler = InStepProfiler::Create(c, plan, o).value();
    for (int step = 0; step < o.warmup_steps + o.steps; ++step) {
      EXPECT_TRUE(profiler->Step(step).ok());
    }
    for (const OpTiming& t : profiler->Timings()) EXPECT_EQ(t.samples, 6) << t.signature;
    EXPECT_TRUE(profiler->LockstepSlowdown().has_value());
    return profiler->SharedCoreLockstep();
  };
  const std::optional<double> shared = profile(4, 2);
  ASSERT_TRUE(shared.has_value());
  EXPECT_GE(*shared, 1.0);
  EXPECT_LT(*shared, 3.0);
  EXPECT_FALSE(profile(4, 0).has_value());
  EXPECT_FALSE(profile(2, 2).has_value());
}

// Every profiler's statistic: the middle value, or the mean of the two
// middle ones, whatever order the samples came in.
TEST(Profile, MedianOfTimings) {
  EXPECT_EQ(Median({3.0}), 3.0);
  EXPECT_EQ(Median({5.0, 1.0, 4.0}), 4.0);
  EXPECT_EQ(Median({9.0, 1.0, 2.0, 4.0}), 3.0);
  EXPECT_EQ(Median({2.0, 2.0, 7.0, 1.0, 2.0, 8.0}), 2.0);
}

// The spread `loom run` and parallel_step_bench report: the population
// standard deviation over the mean.
TEST(Profile, CoefficientOfVariationOfTimings) {
  EXPECT_EQ(CoefficientOfVariation({}), 0);
  EXPECT_EQ(CoefficientOfVariation({0.0, 0.0}), 0);
  EXPECT_EQ(CoefficientOfVariation({4.0, 4.0, 4.0}), 0);
  EXPECT_DOUBLE_EQ(CoefficientOfVariation({1.0, 3.0}), 0.5);
  EXPECT_DOUBLE_EQ(CoefficientOfVariation({2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0}), 0.4);
}

// A pipeline's stages are timed in turns, a step of each, so that every
// stage's ops are sampled over the whole profile: the progress runs over
// the steps once, not once per stage, and each stage's ops have a sample
// per step (two where both stages run it).
TEST(Profile, InStepTimesThePipelineStagesInTurns) {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 2;
  const Plan plan =
      PlanGpt(c, OptimizerConfig(), MakeStrategy(1, 1, 2, 2, "1F1B"), {}, LocalPlanOptions())
          .value();
  ASSERT_EQ(InStepTimedRanks(plan), (std::vector<int>{0, 1}));
  StepProfileOptions o;
  o.warmup_steps = 1;
  o.steps = 2;
  o.side_by_side = 1;
  std::vector<std::pair<int, int>> progress;
  const std::vector<OpTiming> timings =
      ProfileInStep(c, plan, o, [&](int step, int total) { progress.emplace_back(step, total); })
          .value()
          .timings;
  EXPECT_EQ(progress, (std::vector<std::pair<int, int>>{{0, 3}, {1, 3}, {2, 3}}));
  std::map<std::string, int> samples_of_type;
  for (const OpTiming& t : timings) {
    EXPECT_TRUE(t.samples == 2 || t.samples == 4) << t.samples << " samples of " << t.signature;
    samples_of_type[t.type] = t.samples;
  }
  EXPECT_EQ(samples_of_type["lookup_table"], 2);                // the first stage's
  EXPECT_EQ(samples_of_type["softmax_with_cross_entropy"], 2);  // the last stage's
  EXPECT_EQ(samples_of_type["matmul"], 4);                      // both stages'
}

TEST(Profile, ErrorsNameTheCulprit) {
  const std::string dir = MakeTempDir("loom_profile_errors");
  Result gpu = Loom("profile --cluster a100 --cost_table " + dir + "/t.pbtxt");
  EXPECT_EQ(gpu.code, 1);
  EXPECT_EQ(gpu.out, "loom profile: --cluster a100 describes GPUs, but loom profile "
                     "measures this host's CPU (use a CPU cluster such as local)\n");
  std::ofstream(dir + "/bad.pbtxt") << "name: \"x\"\ndevice { peak_fp32_flop: 1 }\n";
  Result cluster = Loom("profile --cluster " + dir + "/bad.pbtxt");
  EXPECT_EQ(cluster.code, 1);
  EXPECT_EQ(cluster.out, "loom profile: --cluster: " + dir +
                             "/bad.pbtxt: line 2, column 24: Message type "
                             "\"loom.proto.Device\" has no field named "
                             "\"peak_fp32_flop\"\n");
  std::ofstream(dir + "/t.pbtxt") << "entry { median_seconds: -1 }\n";
  Result table = Loom("profile --preset gpt-tiny --cost_table " + dir + "/t.pbtxt");
  EXPECT_EQ(table.code, 1);
  EXPECT_EQ(table.out, "loom profile: " + dir +
                           "/t.pbtxt: entry 0 (): signature is missing\n");
}

// The device's rates, and how far one core's speed moved while it was
// timed: 4 samples a second.
TEST(Profile, CalibrateDeviceMeasuresTheCoreAndItsNoise) {
  const std::string out = MakeTempDir("loom_profile_calibrate") + "/local.pbtxt";
  Result r = Loom("profile --calibrate_device --calibrate_seconds 1 --cluster_out " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("host noise: one core's sgemm over 1 s (4 samples): median "),
            std::string::npos) << r.out;
  const proto::Cluster cluster = LoadCluster(out).value();
  EXPECT_GT(cluster.device().peak_fp32_flops(), 1e9);
  EXPECT_GT(cluster.device().memory_bandwidth(), 1e8);
  // The cache, where the host lists one.
  if (auto cache = LastLevelCacheBytes(); cache.ok()) {
    EXPECT_EQ(cluster.device().cache_bytes(), *cache);
    EXPECT_TRUE(cluster.device().has_uncached_read_seconds_per_byte());
    EXPECT_NE(r.out.find("a matmul takes "), std::string::npos) << r.out;
  } else {
    EXPECT_NE(r.out.find("cache: not measured ("), std::string::npos) << r.out;
  }

  Result bad = Loom("profile --calibrate_device --calibrate_seconds -1 --cluster_out " + out);
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.out, "loom profile: --calibrate_seconds must be 0 to 3600, got -1\n");
}

// Every measuring command refuses a wait for a quiet host it could not
// keep, naming the flag, before it measures anything.
TEST(Profile, RefusesANegativeWaitForAQuietHost) {
  const std::string dir = MakeTempDir("loom_profile_bad_wait");
  for (const std::string command :
       {"profile --calibrate_device --cluster_out " + dir + "/c.pbtxt",
        "profile --preset gpt-tiny --layers 1 --cost_table " + dir + "/t.pbtxt",
        "tune --preset gpt-tiny --layers 1 --devices 2 --cluster local --profile_ops "
        "--cost_table " +
            dir + "/t.pbtxt"}) {
    const Result r = Loom(command + " --wait_for_quiet_seconds -1");
    EXPECT_EQ(r.code, 1) << command;
    EXPECT_NE(r.out.find("--wait_for_quiet_seconds must be 0 to 3600, got -1\n"), std::string::npos)
        << command << ": " << r.out;
    EXPECT_EQ(Lines(r.out.substr(r.out.find("loom "))), 1) << r.out;
  }
}

TEST(Profile, CommRejectsABadComputeRangeNamingItsFlag) {
  Result r = Loom("profile --comm --comm_shared_between_ms 2,1 --cluster_out " +
                  MakeTempDir("loom_profile_bad_between") + "/c.pbtxt");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "loom profile: --comm_shared_between_ms must be 'MIN,MAX' with 0 <= MIN <= MAX "
                   "and MAX > 0, or '0'; got '2,1'\n");
  // Longer gaps must be longer than the fitted one's mean, and increasing.
  for (const char* gaps : {"0.3", "4,2", "4,x"}) {
    Result idle = Loom(StrCat("profile --comm --comm_idle_ms ", gaps, " --cluster_out ",
                              MakeTempDir("loom_profile_bad_idle"), "/c.pbtxt"));
    EXPECT_EQ(idle.code, 1);
    EXPECT_EQ(idle.out, StrCat("loom profile: --comm_idle_ms must list increasing gaps in ms, "
                               "each above the one before and the mean of --comm_between_ms "
                               "(0.55 ms), at most 1000; got '", gaps, "'\n"));
  }
}

TEST(Profile, CommWritesAValidClusterFile) {
  const std::string dir = MakeTempDir("loom_profile_comm");
  // Up to 1 MiB, so that the bytes and not the noise decide β.
  Result r = Loom("profile --comm --comm_max_bytes 1048576 --interference_seconds 0.2 "
                  "--comm_rounds 11 --comm_core_wait_calls 9 --comm_call_cpu_seconds 0.2 "
                  "--cost_table " + dir + "/table.pbtxt");
  ASSERT_EQ(r.code, 0) << r.out;
  // Both duplexes are fitted and reported; on a busy host one of them may
  // be undetermined (said so), but the kept fit always has values.
  EXPECT_NE(r.out.find("joint fit, full duplex: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("joint fit, half duplex: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("duplex (direct algorithm): alpha "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  allgather n=2 16384 B"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("interference: matmul on "), std::string::npos) << r.out;
  // A call's own CPU beside compute, at each size, a rank's share: more
  // than none (its bytes are copied), and no more than the host's cores
  // over its wall time.
  for (const char* size : {"4096 B", "65536 B", "1048576 B"}) {
    const size_t at = r.out.find(StrCat("  allreduce ", std::string(8 - std::strlen(size) + 2, ' '),
                                        size));
    ASSERT_NE(at, std::string::npos) << size << "\n" << r.out;
    const size_t share_at = r.out.find(" (", r.out.find(" CPU ", at));
    ASSERT_NE(share_at, std::string::npos) << r.out;
    const double share = std::atof(r.out.c_str() + share_at + 2);
    EXPECT_GT(share, 0) << r.out;
    EXPECT_LE(share, 100.0 * std::thread::hardware_concurrency()) << r.out;
  }
  // Beside the cost table by default.
  auto c = LoadCluster(dir + "/local.cluster.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->intra_node().measured());
  // The fit of the calls' CPU, unless their CPU did not grow with the bytes
  // (a busy host), said so.
  if (r.out.find("call CPU: not recorded") == std::string::npos) {
    ASSERT_TRUE(c->shared_host().intra_node().has_call_cpu()) << r.out;
    EXPECT_GT(c->shared_host().intra_node().call_cpu().bytes_per_second(), 0);
    EXPECT_GE(c->shared_host().intra_node().call_cpu().seconds_per_call(), 0) << r.out;
  }
  EXPECT_GT(c->intra_node().bandwidth(), 0);
  // Calls timed the way steps make them: parties arriving together, and
  // apart (after_wait), each collective with its own fit; on a loaded host
  // the calls apart may not determine one, which is said, and then none is
  // recorded.
  EXPECT_NE(r.out.find("parties arriving apart"), std::string::npos) << r.out;
  EXPECT_NE(c->shared_host().intra_node().has_after_wait(),
            r.out.find("no arriving apart costs recorded") != std::string::npos)
      << r.out;
  // And back to back on awake cores: on a loaded host the times may not
  // determine a fit, which is said, and then none is recorded.
  EXPECT_NE(r.out.find("back to back, the cores kept awake"), std::string::npos) << r.out;
  EXPECT_NE(c->shared_host().intra_node().has_awake(),
            r.out.find("no awake costs recorded") != std::string::npos)
      << r.out;
  // (A collective whose few samples cannot determine its own fit on a
  // loaded host keeps the link's values.)
  EXPECT_GE(c->intra_node().collective_size(), 1);
  if (c->shared_host().intra_node().has_after_wait()) {
    EXPECT_GE(c->shared_host().intra_node().after_wait().collective_size(), 1);
  }
  EXPECT_GE(c->comm_compute_slowdown(), 1.0);
  EXPECT_EQ(c->name(), "local");
  // A send hands its bytes to the socket up to Gloo's buffer on this host.
  EXPECT_EQ(c->intra_node().send_buffer_bytes(), GlooSendBufferBytes());
  EXPECT_NE(r.out.find(StrCat("sends: up to ", GlooSendBufferBytes(), " B return once")),
            std::string::npos)
      << r.out;
  // How long calls wait for cores that compute, and calls beside another
  // group's on the same cores, where two can be pinned.
  if (CoresOfThisProcess().size() < 2) {
    std::printf("SKIPPED core-wait and shared-cores parts: this process may use fewer than 2 "
                "cores\n");
    EXPECT_NE(r.out.find("core wait: not measured"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("shared cores: not measured"), std::string::npos) << r.out;
    EXPECT_FALSE(c->shared_host().intra_node().has_shared_cores());
    return;
  }
  EXPECT_NE(r.out.find("two ranks on each core, both groups calling"), std::string::npos)
      << r.out;
  EXPECT_NE(c->shared_host().intra_node().has_shared_cores(),
            r.out.find("no shared cores costs recorded") != std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  on idle cores "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  beside compute that never pauses "), std::string::npos) << r.out;
  // (Unless the fit is too far from its samples to record, which it says,
  // and the preset's is kept.)
  const bool recorded = r.out.find("core wait: not recorded") == std::string::npos;
  EXPECT_EQ(c->shared_host().core_wait().SerializeAsString() !=
                LoadCluster("local")->shared_host().core_wait().SerializeAsString(),
            recorded)
      << r.out;
  if (recorded) {
    ASSERT_TRUE(c->shared_host().has_core_wait()) << r.out;
    EXPECT_GE(c->shared_host().core_wait().waits(), 0);
    EXPECT_GT(c->shared_host().core_wait().slice_seconds(), 0);
  }

  // --comm_shared_only measures that regime again into the file and keeps
  // the rest of the link.
  const proto::Link before = c->intra_node();
  const proto::HostLinkCosts before_host = c->shared_host().intra_node();
  Result shared = Loom("profile --comm_shared_only --comm_max_bytes 1048576 --comm_rounds 11 "
                       "--cluster_out " + dir + "/local.cluster.pbtxt");
  ASSERT_EQ(shared.code, 0) << shared.out;
  EXPECT_NE(shared.out.find("two groups of 2 ranks on the same cores, both calling (in-process)"),
            std::string::npos) << shared.out;
  auto again = LoadCluster(dir + "/local.cluster.pbtxt");
  ASSERT_TRUE(again.ok()) << again.status();
  // (Unless a loaded host made the samples unfit, which it says.)
  if (shared.out.find("no shared cores (--comm_shared_only") != std::string::npos) {
    std::printf("SKIPPED the rest: the shared-core samples did not determine a fit\n");
    return;
  }
  ASSERT_TRUE(again->shared_host().intra_node().has_shared_cores()) << shared.out;
  EXPECT_GT(again->shared_host().intra_node().shared_cores().bandwidth(), 0);
  EXPECT_EQ(again->intra_node().bandwidth(), before.bandwidth());
  EXPECT_EQ(again->shared_host().intra_node().after_wait().SerializeAsString(),
            before_host.after_wait().SerializeAsString());
  // Its note replaces the earlier measurement's.
  const std::string& source = again->intra_node().source();
  EXPECT_NE(source.find("; shared cores (--comm_shared_only, "), std::string::npos) << source;
  EXPECT_EQ(source.find("; shared cores: "), std::string::npos) << source;
}

TEST(Profile, CommSharedOnlyNeedsAMeasuredLinkAndNotComm) {
  const std::string dir = MakeTempDir("loom_profile_shared_only");
  Result missing = Loom("profile --comm_shared_only --cluster_out " + dir + "/c.pbtxt");
  EXPECT_EQ(missing.code, 1);
  EXPECT_EQ(missing.out, "loom profile: --comm_shared_only adds to the link of an existing "
                         "cluster file, and " + dir + "/c.pbtxt does not exist (run loom profile "
                         "--comm with the same --cluster_out first)\n");
  // A file whose link was never measured (here: only the device calibrated).
  std::ofstream(dir + "/c.pbtxt") << "name: \"local\" shared_host { core_sharing: PINNED } "
                                     "device { kind: CPU cores: 2 peak_fp32_flops: 1e11 "
                                     "memory_bandwidth: 1e10 memory_bytes: 1000000000 "
                                     "kernel_launch_seconds: 1e-7 } "
                                     "devices_per_node: 1 "
                                     "ranks_per_device: 2 intra_node { bandwidth: 1e9 "
                                     "latency_seconds: 1e-5 } inter_node { bandwidth: 1e8 "
                                     "latency_seconds: 1e-4 }\n";
  Result unmeasured = Loom("profile --comm_shared_only --cluster_out " + dir + "/c.pbtxt");
  EXPECT_EQ(unmeasured.code, 1);
  EXPECT_EQ(unmeasured.out,
            "loom profile: --comm_shared_only adds to a measured link, and this cluster's link "
            "between 2 ranks is not (run loom profile --comm with the same --cluster_out "
            "first)\n");
  Result both = Loom("profile --comm --comm_shared_only --cluster_out " + dir + "/c.pbtxt");
  EXPECT_EQ(both.code, 1);
  EXPECT_EQ(both.out, "loom profile: --comm_shared_only measures one regime of a link --comm "
                      "already measured; give one or the other\n");
}

TEST(OpProfiler, IdsAndLabelsStayInRange) {
  RegisterAllOps();
  // A vocabulary shard of rows [1000, 1100): ids must fall inside it for
  // the rows to be looked up at all; labels index 50 classes.
  Program p;
  Block& b = p.global_block();
  auto var = [&](const char* name, DataType dtype, const Shape& shape) {
    proto::VarDesc* v = b.AddVar(name);
    SetMeta(TensorMeta{dtype, shape}, v);
    v->set_is_data(true);
  };
  var("w", proto::FP32, {100, 16});
  var("ids", proto::INT64, {4, 8});
  var("logits", proto::FP32, {32, 50});
  var("label", proto::INT64, {32});
  Op* lookup = AppendOpInferShapes(
      b, OpDescBuilder("lookup_table").Input("W", "w").Input("Ids", "ids")
             .Output("Out", "emb").Attr("start_index", int64_t{1000})).value();
  Op* xent = AppendOpInferShapes(
      b, OpDescBuilder("softmax_with_cross_entropy").Input("Logits", "logits")
             .Input("Label", "label").Output("Softmax", "sm").Output("Loss", "loss"))
      .value();
  OpProfileOptions fast;
  fast.samples = 3;
  for (Op* op : {lookup, xent}) {
    auto t = ProfileOp(*op, fast);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_GT(t->median_seconds, 0);
    EXPECT_EQ(t->samples, 3);
    EXPECT_GE(t->runs_per_sample, 1);
  }
  // Communication is the communication model's, not the profiler's.
  Op* ar = AppendOpInferShapes(b, OpDescBuilder("allreduce").Input("X", "w")
                                      .Output("Out", "w")).value();
  EXPECT_EQ(UnprofilableReason(*ar, fast),
            "communicates (the communication model prices it)");
  fast.max_bytes = 100;
  EXPECT_EQ(UnprofilableReason(*lookup, fast),
            "touches 8704 bytes, over the limit of 100");
}

}  // namespace
}  // namespace loom
