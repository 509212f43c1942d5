#include "tools/interleaved_profile.h"

#include <cstdio>
#include <optional>
#include <vector>

#include "cost_model/cluster.h"
#include "cost_model/cost_table.h"
#include "framework/file_util.h"
#include "tools/profile_util.h"

namespace loom {

StatusOr<std::unique_ptr<InterleavedProfile>> InterleavedProfile::Create(
    const ParallelTrainer& trainer, const InterleavedProfileOptions& options) {
  std::unique_ptr<InterleavedProfile> p(new InterleavedProfile);
  p->options_ = options;
  const bool profiles = !options.launch.has_value() || options.launch->rank == 0;
  if (profiles) {
    // A malformed table fails before the run, not after it.
    LOOM_RETURN_IF_ERROR(CostTable::LoadOrEmpty(options.cost_table).status());
    StepProfileOptions so;
    so.warmup_steps = options.warmup_steps;
    so.steps = options.steps;
    // The simulator leaves the shared cores' lockstep out where core_wait
    // prices the OS's slices (CostModelTimer::SharedCoreSlowdown).
    if (options.core_wait_calls > 0 || options.cluster.has_core_wait()) so.shared_core_steps = 0;
    LOOM_ASSIGN_OR_RETURN(p->profiler_,
                          InStepProfiler::Create(trainer.config(), trainer.plan(), so));
  }
  if (!options.cluster_out.empty() && profiles) {
    LOOM_RETURN_IF_ERROR(CheckWritable(options.cluster_out));
  }
  if (options.core_wait_calls > 0) {
    // A launch's processes would each need the others' cores too.
    if (options.launch.has_value()) {
      return InvalidArgument("core-wait calls between steps are timed in one process only, "
                             "not under loom launch");
    }
    if (options.cluster_out.empty()) {
      return InvalidArgument("core-wait calls between steps need a cluster file to write");
    }
    if (options.cluster.device().core_sharing() != proto::Device::PINNED) {
      return InvalidArgument("core-wait calls between steps: the cluster's ranks do not keep to "
                             "their cores (device.core_sharing is not PINNED)");
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

Status InterleavedProfile::Write() {
  if (profiler_ == nullptr) return Status::OK();
  std::vector<proto::CostEntry> entries;
  for (const OpTiming& t : profiler_->Timings()) {
    entries.push_back(CostEntryOf(t, options_.device, "step"));
  }
  CostTable::MergeCounts counts;
  LOOM_ASSIGN_OR_RETURN(CostTable table,
                        MergeIntoCostTable(options_.cost_table, entries, &counts));
  PrintTo(options_.report,
          "profiled %zu signatures in steps between the run's: %d added, %d replaced\n"
          "wrote %s (%d entries)\n",
          entries.size(), counts.added, counts.replaced, options_.cost_table.c_str(), table.size());
  const std::optional<double> lockstep = profiler_->LockstepSlowdown();
  if (lockstep) {
    PrintTo(options_.report,
            "lockstep: ranks meeting after each stretch of compute on %d cores would take "
            "%.1f%% longer than the mean (the slowest core's stretches)\n",
            profiler_->copies(), (*lockstep - 1) * 100);
  }
  const std::optional<double> shared = profiler_->SharedCoreLockstep();
  if (shared) {
    PrintTo(options_.report,
            "lockstep on shared cores: with two ranks on each core, %.1f%% longer than the "
            "mean\n",
            (*shared - 1) * 100);
  }
  return options_.cluster_out.empty() ? Status::OK() : WriteCluster(lockstep, shared);
}

Status InterleavedProfile::WriteCluster(std::optional<double> lockstep,
                                        std::optional<double> shared_core_lockstep) {
  proto::Cluster cluster = options_.cluster;
  if (core_wait_ != nullptr) {
    const int sampled = steps_ - options_.warmup_steps;
    LOOM_RETURN_IF_ERROR(RecordCoreWait(
        core_wait_->Timings(), /*ranks=*/2,
        StrCat("allreduce of ", options_.core_wait_bytes, " B on 2 pinned ranks, medians of ",
               options_.core_wait_calls, " calls after each of ", sampled, " steps"),
        StrCat("loom run --interleaved_profile, ", Today(), ": allreduces of ",
               options_.core_wait_bytes, " B beside compute bursts on 2 pinned ranks after each ",
               "of the run's steps, medians"),
        &cluster, options_.report));
  }
  // Under a launch only the shared cores' lockstep: the two-core one put
  // the emulated two-rank rows 4.8% to 12.6% long, where without it they
  // were within 8.4% (docs/simulator_accuracy.md).
  if (lockstep && !options_.launch.has_value()) cluster.set_lockstep_slowdown(*lockstep);
  if (shared_core_lockstep) cluster.set_shared_core_lockstep(*shared_core_lockstep);
  LOOM_RETURN_IF_ERROR(ValidateCluster(cluster).WithContext(options_.cluster_out));
  LOOM_RETURN_IF_ERROR(SaveCluster(cluster, options_.cluster_out));
  PrintTo(options_.report, "wrote %s (use it with --cluster %s)\n", options_.cluster_out.c_str(),
          options_.cluster_out.c_str());
  return Status::OK();
}

}  // namespace loom
