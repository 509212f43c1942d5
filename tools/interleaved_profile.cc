#include "tools/interleaved_profile.h"

#include <cstdio>
#include <vector>

#include "cost_model/cost_table.h"
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
    LOOM_ASSIGN_OR_RETURN(p->profiler_,
                          InStepProfiler::Create(trainer.config(), trainer.plan(), so));
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
  std::printf("profiled %zu signatures in steps between the run's: %d added, %d replaced\n"
              "wrote %s (%d entries)\n",
              entries.size(), counts.added, counts.replaced, options_.cost_table.c_str(),
              table.size());
  return Status::OK();
}

}  // namespace loom
