#include "profiling/interleaved_profile.h"

#include <optional>

#include "cost_model/cluster.h"

namespace loom {

StatusOr<std::unique_ptr<InterleavedProfile>> InterleavedProfile::Create(
    const ParallelTrainer& trainer, const InterleavedProfileOptions& options) {
  std::unique_ptr<InterleavedProfile> p(new InterleavedProfile);
  p->options_ = options;
  const bool profiles = !options.launch.has_value() || options.launch->rank == 0;
  if (profiles) {
    StepProfileOptions so;
    so.warmup_steps = options.warmup_steps;
    so.cache_share = RankCacheShare(options.cluster, trainer.plan().layout.world_size());
    so.steps = options.steps;
    // The simulator leaves the shared cores' lockstep out where core_wait
    // prices the OS's slices (CostModelTimer::SharedCoreSlowdown).
    if (options.core_wait_calls > 0 || options.cluster.shared_host().has_core_wait())
      so.shared_core_steps = 0;
    LOOM_ASSIGN_OR_RETURN(p->profiler_,
                          InStepProfiler::Create(trainer.config(), trainer.plan(), so));
  }
  if (options.core_wait_calls > 0) {
    // A launch's processes would each need the others' cores too.
    if (options.launch.has_value()) {
      return InvalidArgument("core-wait calls between steps are timed in one process only, "
                             "not under loom launch");
    }
    if (options.cluster.shared_host().core_sharing() != proto::SharedHost::PINNED) {
      return InvalidArgument(
          "core-wait calls between steps: the cluster's ranks do not keep to "
          "their cores (shared_host.core_sharing is not PINNED)");
    }
    CoreWaitOptions cw;
    cw.calls = options.core_wait_calls;
    cw.bytes = options.core_wait_bytes;
    cw.timeout = options.timeout;
    LOOM_ASSIGN_OR_RETURN(p->core_wait_, CoreWaitSampler::Create(cw));
  }
  if (options.launch.has_value()) {
    LOOM_ASSIGN_OR_RETURN(p->launch_world_,
                          LaunchWorld(*options.launch, "interleaved-profile", options.timeout));
    // The first step starts together too.
    LOOM_RETURN_IF_ERROR(p->Barrier());
  }
  return p;
}

Status InterleavedProfile::Barrier() {
  LOOM_ASSIGN_OR_RETURN(Communicator * all, launch_world_->Get(kDpRing));
  Tensor one(TensorMeta{proto::FP32, {1}});
  one.data<float>()[0] = 1;
  LOOM_RETURN_IF_ERROR(
      all->AllReduce({&one}, ReduceOp::kSum).WithContext("interleaved profile's barrier"));
  step_start_ = std::chrono::steady_clock::now();
  return Status::OK();
}

Status InterleavedProfile::Step(double* step_ms) {
  // The run's processes stand still while rank 0's profiles: their
  // threads would otherwise take the cores the profile times.
  if (launch_world_ != nullptr) {
    const auto started = step_start_;
    LOOM_RETURN_IF_ERROR(Barrier());
    *step_ms = std::chrono::duration<double, std::milli>(step_start_ - started).count();
  }
  if (profiler_ != nullptr) LOOM_RETURN_IF_ERROR(profiler_->Step(steps_));
  if (core_wait_ != nullptr && steps_ >= options_.warmup_steps) {
    LOOM_RETURN_IF_ERROR(core_wait_->Sample().WithContext("core-wait calls"));
  }
  ++steps_;
  if (launch_world_ != nullptr) LOOM_RETURN_IF_ERROR(Barrier());
  return Status::OK();
}

}  // namespace loom
