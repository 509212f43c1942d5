// The device allocator's high-water mark of a real run against the peak the
// simulator gives the same plan (issue 38): each rank's measured peak of
// temporaries within 10% of the simulated one, on gpt-small layers, with
// and without recomputation and sequence parallelism. The executor frees
// each temporary after its last toucher as lowering counts them, and both
// allocate a call's outputs when it arrives, before its peers join, so the
// two agree but for timing and scratch: measured 1.000 everywhere but
// under sequence parallelism (0.978 to 1.045), whose all-gathers and
// reduce-scatters along the sequence of a batch of more than one regroup
// their blocks through a scratch buffer the simulator does not count, and
// whose ranks race (pp=2's stages measure 2% under and over). Until
// 2026-12-07 the simulator allocated at the last party's arrival, and pp=2's
// first stage measured 1.017 and 1.025: its recvs held their buffers while
// waiting. Under ZeRO-3 (dp=2 mp=2) a rank measures 1.000 or 0.961: where
// the sharding stream's prefetched gather allocates among the compute's
// frees is timing. Until 2026-12-08 a gradient bucket was freed whenever
// its reduce-scatter ended, and a rank measured a bucket over the
// simulated peak in some runs (lowering's BoundShardedBuckets).
#include <cstdio>

#include <gtest/gtest.h>

#include "cost_model/cluster.h"
#include "cost_model/cost_context.h"
#include "models/gpt.h"
#include "passes/strategy.h"
#include "runtime/parallel_trainer.h"
#include "runtime/simulation.h"

namespace loom {
namespace {

TEST(DeviceMemory, MeasuredPeakFollowsTheSimulatedPeak) {
  GptConfig c = GptPreset("gpt-small").value();
  c.num_layers = 2;
  c.seq_len = 128;
  c.batch_size = 4;
  c.vocab_size = 512;  // so that the layers, not the logits, make the peak
  c.dropout = 0.1f;
  const proto::Cluster cluster = LoadCluster("local").value();
  const CostContext costs(cluster, CostTable());
  const TimerFactory timer = CostModelTimers(costs);
  struct Case {
    int mp, pp, micro_batches;
    const char* recompute;
    bool sp = false;  // sequence parallelism
    int dp = 1;
    int sharding_stage = 0;
  };
  for (const Case& k : {Case{1, 1, 1, "none"}, Case{1, 1, 1, "full"}, Case{2, 1, 1, "none"},
                        Case{2, 1, 1, "selective"}, Case{1, 2, 2, "none"}, Case{1, 2, 2, "full"},
                        Case{2, 1, 1, "none", true}, Case{2, 1, 1, "selective", true},
                        Case{2, 2, 2, "full", true}, Case{2, 1, 1, "none", false, 2, 3}}) {
    SCOPED_TRACE(StrCat("dp=", k.dp, " mp=", k.mp, " pp=", k.pp, " recompute ", k.recompute,
                        k.sp ? " sp" : "", " zero ", k.sharding_stage));
    proto::Strategy s = MakeStrategy(k.dp, k.mp, k.pp, k.micro_batches, "1F1B");
    s.mutable_sharding()->set_stage(k.sharding_stage);
    s.mutable_recompute()->set_granularity(k.recompute);
    s.mutable_mp()->set_sequence_parallel(k.sp);
    ParallelTrainer::Options options;
    options.comm.timeout = std::chrono::seconds(30);
    auto t = ParallelTrainer::Create(c, OptimizerConfig(), s, options);
    ASSERT_TRUE(t.ok()) << t.status();
    ASSERT_TRUE((*t)->Step(0).ok());
    for (int r : (*t)->local_ranks()) (*t)->rank_device(r).ResetPeakBytes();
    ASSERT_TRUE((*t)->Step(1).ok());
    auto sim = SimulatePlan((*t)->plan(), timer);
    ASSERT_TRUE(sim.ok()) << sim.status();
    for (int r : (*t)->local_ranks()) {
      const double measured = static_cast<double>((*t)->rank_device(r).Memory().peak_bytes);
      const double simulated = static_cast<double>(sim->result.ranks[r].peak_temporary_bytes);
      std::printf(
          "dp=%d mp=%d pp=%d %s%s zero %d rank %d: measured %.2f MB, simulated %.2f MB "
          "(%.3f)\n",
          k.dp, k.mp, k.pp, k.recompute, k.sp ? " sp" : "", k.sharding_stage, r, measured / 1e6,
          simulated / 1e6, measured / simulated);
      EXPECT_NEAR(measured / simulated, 1.0, 0.10) << "rank " << r;
      if (k.sharding_stage == 3) {
        // A gradient bucket is held until the bucket two on begins, so it
        // is there at the simulated peak in every run; where a prefetched
        // gather's buffer lands among the compute's frees still races (in
        // these runs, only lower).
        EXPECT_LE(measured / simulated, 1.001) << "rank " << r;
      } else if (!k.sp) {
        // Without sequence parallelism's scratch, to within 1% (a recv's
        // buffer held from its arrival made pp=2's first stage 1.7-2.5%
        // over).
        EXPECT_NEAR(measured / simulated, 1.0, 0.01) << "rank " << r;
      }
    }
  }
}

}  // namespace
}  // namespace loom
