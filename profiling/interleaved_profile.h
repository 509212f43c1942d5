// Profiling between a run's steps (loom run --interleaved_profile, loom
// demo): a step of the in-step profiler (step_profiler.h) after each of the
// run's own. On a host whose speed moves by tens of % within seconds, a
// profile taken before a run prices its ops at another phase than the
// run's; taken between the run's steps, both sample the same seconds.
//
// In one process the ranks' steps simply alternate with the profile's.
// Under loom launch every process meets at a barrier after its step, the
// process of rank 0 profiles every timed rank (as `loom profile --plan`
// would), and the others wait for it at a second barrier. In one process
// it can also time calls beside compute bursts after each step
// (core_wait_profiler.h), the other cost that moves with the host's phase.
//
// This measures only; tools/interleaved_profile_files.h records what it
// measured into the cost table and the cluster file.
#ifndef LOOM_PROFILING_INTERLEAVED_PROFILE_H_
#define LOOM_PROFILING_INTERLEAVED_PROFILE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "cost_model/cluster.pb.h"
#include "executor/comm/comm_world.h"
#include "profiling/core_wait_profiler.h"
#include "profiling/step_profiler.h"
#include "runtime/launch_env.h"
#include "runtime/parallel_trainer.h"

namespace loom {

struct InterleavedProfileOptions {
  int warmup_steps = 2;  // profile steps not sampled
  int steps = 1;         // sampled profile steps
  // Under loom launch: this process's place in it, and how long it waits
  // for the others at a barrier.
  std::optional<LaunchEnv> launch;
  std::chrono::milliseconds timeout{60000};
  // In one process: all-reduces timed beside each length of compute burst
  // after each sampled step (0: none).
  int core_wait_calls = 0;
  int64_t core_wait_bytes = 16 << 10;
  // The cluster the measurements are for: core-wait calls need its ranks
  // pinned (shared_host.core_sharing PINNED), and where it prices the OS's
  // slices by a core_wait the shared cores' lockstep is not measured.
  proto::Cluster cluster;
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
  // trainer's step spans every rank), which may then be null.
  Status Step(double* step_ms);

  // The op timings and lockstep slowdowns; null in the processes of a
  // launch that do not profile (all but rank 0's).
  const InStepProfiler* profiler() const { return profiler_.get(); }
  // The calls timed beside compute bursts; null without core-wait calls.
  const CoreWaitSampler* core_wait() const { return core_wait_.get(); }
  // Profile steps taken past the warm-up.
  int sampled_steps() const { return steps_ - options_.warmup_steps; }
  const InterleavedProfileOptions& options() const { return options_; }

 private:
  InterleavedProfile() = default;
  Status Barrier();

  InterleavedProfileOptions options_;
  std::unique_ptr<InStepProfiler> profiler_;    // null in processes that do not profile
  std::unique_ptr<CoreWaitSampler> core_wait_;  // null without core-wait calls
  std::unique_ptr<CommWorld> launch_world_;     // under loom launch
  std::chrono::steady_clock::time_point step_start_;  // the last barrier's end
  int steps_ = 0;
};

}  // namespace loom

#endif  // LOOM_PROFILING_INTERLEAVED_PROFILE_H_
