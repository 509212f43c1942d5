// loom run --interleaved_profile: a step of the in-step profiler
// (profiling/step_profiler.h) after each of the run's own, its timings merged
// into a cost table at the end. On a host whose speed moves by tens of %
// within seconds, a profile taken before a run prices its ops at another
// phase than the run's; taken between the run's steps, both sample the
// same seconds. In one process the ranks' steps simply alternate with the
// profile's; under loom launch, every process meets at a barrier after
// its step, the process of rank 0 profiles every timed rank (as `loom
// profile --plan` would), and the others wait for it at a second barrier.
// In one process it can also time calls beside compute bursts after each
// step (profiling/core_wait_profiler.h) and write the cluster with their
// core_wait, the other cost that moves with the host's phase.
#ifndef LOOM_TOOLS_INTERLEAVED_PROFILE_H_
#define LOOM_TOOLS_INTERLEAVED_PROFILE_H_

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "cost_model/cluster.pb.h"
#include "executor/comm/comm_world.h"
#include "profiling/core_wait_profiler.h"
#include "runtime/parallel_trainer.h"
#include "profiling/step_profiler.h"
#include "tools/launch_env.h"

namespace loom {

struct InterleavedProfileOptions {
  std::string cost_table;  // merged into at the end
  std::string device;      // the table's device (TableDevice of the cluster)
  int warmup_steps = 2;    // profile steps not sampled
  int steps = 1;           // sampled profile steps
  // Under loom launch: this process's place in it, and how long it waits
  // for the others at a barrier.
  std::optional<LaunchEnv> launch;
  std::chrono::milliseconds timeout{60000};
  // In one process: calls timed beside each burst after each sampled step
  // (0: none; they need `cluster_out`). `cluster` is written to
  // `cluster_out` (empty: not written) with the profile's lockstep
  // slowdowns (on cores of their own, and shared where the plan has more
  // ranks than cores), and with the calls' fit as its core_wait.
  int core_wait_calls = 0;
  int64_t core_wait_bytes = 16 << 10;
  proto::Cluster cluster;
  std::string cluster_out;
  // Where Write() says what it measured and wrote (null: nowhere).
  FILE* report = stdout;
};

class InterleavedProfile {
 public:
  // Every process of a launch creates one (they connect here).
  static StatusOr<std::unique_ptr<InterleavedProfile>> Create(
      const ParallelTrainer& trainer, const InterleavedProfileOptions& options);

  // After each of the run's steps. Under a launch it also sets
  // `*step_ms` to the step's time over every process: from the barrier
  // that released it to the one that found every process done. A
  // process's own Step() time is its rank's span, and the last stage's
  // ends before the first stage's last backward and its update do;
  // steps that follow each other without a barrier hide that, as the
  // next step waits for them. In one process it leaves `*step_ms` (the
  // trainer's step spans every rank).
  Status Step(double* step_ms);

  // Merges the timings into the cost table and says so on stdout (the
  // process of rank 0; others have nothing to write); with a cluster_out,
  // writes the cluster too.
  Status Write();

 private:
  InterleavedProfile() = default;
  Status Barrier();
  // With the profile's lockstep slowdown, where its copies gave one.
  Status WriteCluster(std::optional<double> lockstep, std::optional<double> shared_core_lockstep);

  InterleavedProfileOptions options_;
  std::unique_ptr<InStepProfiler> profiler_;  // null in processes that do not profile
  std::unique_ptr<CoreWaitSampler> core_wait_;  // null without core-wait calls
  std::unique_ptr<CommWorld> launch_world_;   // under loom launch
  std::chrono::steady_clock::time_point step_start_;  // the last barrier's end
  int steps_ = 0;
};

}  // namespace loom

#endif  // LOOM_TOOLS_INTERLEAVED_PROFILE_H_
