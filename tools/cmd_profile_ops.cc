// loom profile (ops): times every distinct op signature of the programs a
// step runs into the cost table. The programs are a plan's (a layout, a
// saved plan, or the serial layout of a preset: the micro-batch slices,
// tensor-parallel shards and accumulation a run executes), or a program
// file's. A plan's ops are timed inside its ranks' steps (step_profiler.h);
// what no step computes, and a program file's ops, one op at a time.
#include <chrono>
#include <cstdio>
#include <memory>
#include <set>

#include "cost_model/cluster.h"
#include "cost_model/cost_table.h"
#include "executor/cpu/blas_kernels.h"
#include "executor/device.h"
#include "framework/file_util.h"
#include "framework/serialization.h"
#include "profiling/plan_op_profile.h"
#include "runtime/gpt_plan.h"
#include "tools/common_flags.h"
#include "tools/flag_groups.h"
#include "tools/profile_util.h"

DECLARE_string(plan);
DECLARE_string(cluster_out);  // cmd_profile.cc
DEFINE_bool(in_step, true,
            "time a plan's ops inside training steps of each of its ranks (communication "
            "reduced to its local part); off: each op alone in a loop");
DEFINE_int32(profile_samples, 7,
             "timed samples per op (in steps: timed steps); the median is kept");
DEFINE_int32(profile_warmup, 2, "untimed runs (in steps: steps) before an op's samples");
DEFINE_double(profile_min_sample_ms, 0.2,
              "alone: each sample repeats a fast op until it lasts this long");
DEFINE_int64(profile_max_bytes, int64_t{4} << 30,
             "skip ops whose tensors total more bytes than this");
DEFINE_double(wait_for_quiet_seconds, 60,
              "before measuring, wait up to this long for other processes to leave the CPU "
              "(some task waiting for a core under 5% of the last 10 s, Linux's CPU pressure); "
              "0: measure at once");

namespace loom {
namespace {

// The programs whose ops are timed. Each rank's step, op by op in job
// order, is kept for the summary line; ranks sharing a program set appear
// once.
struct ProfileTarget {
  std::string what;
  bool has_plan = false;
  GptConfig config;  // the plan's model
  Plan plan;
  Program program;  // a program file's, without a plan
  std::vector<std::pair<std::string, std::vector<const Op*>>> steps;
};

// --plan's plan, or the preset's planned under the layout flags (every
// rank; with none, the serial layout of one rank).
Status PlanTarget(ProfileTarget* t) {
  if (!FLAGS_plan.empty()) {
    LOOM_ASSIGN_OR_RETURN(t->plan, LoadPlan(FLAGS_plan));
    StatusOr<GptConfig> config = GptConfigOfPlan(t->plan);
    if (!config.ok()) return config.status().WithContext(FLAGS_plan);
    t->config = *config;
    t->what = StrCat("plan ", FLAGS_plan);
  } else {
    LOOM_ASSIGN_OR_RETURN(proto::Strategy strategy, StrategyFromFlags());
    LOOM_ASSIGN_OR_RETURN(t->config, GptConfigFromFlags());
    LOOM_ASSIGN_OR_RETURN(OptimizerConfig opt, OptimizerConfigFromFlags());
    // Planned as `loom run` plans it, since the profile times its steps.
    PlanOptions plan_options;
    LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CostContext> costs,
                          RunPlanningCostsFromFlags(&plan_options));
    LOOM_ASSIGN_OR_RETURN(t->plan, PlanGpt(t->config, opt, strategy, {}, plan_options));
    const Plan& p = t->plan;
    t->what =
        StrCat(t->config.name, " (", t->config.num_layers,
               t->config.num_layers == 1 ? " layer" : " layers", ") at dp=", p.layout.dp,
               " mp=", p.layout.mp, " pp=", p.layout.pp, ", ", p.resolved.schedule_mode(), " over ",
               MicroBatchesText(t->config, p.layout.dp, p.resolved.micro_batches()));
  }
  t->has_plan = true;
  std::set<const void*> seen;
  for (const RankPlan& rank : t->plan.ranks) {
    if (!seen.insert(rank.programs_key()).second) continue;
    std::vector<const Op*> ops;
    for (const Job& job : rank.jobs) {
      const Program* program = rank.ProgramFor(job);
      if (program == nullptr) continue;
      for (const Op* op : program->global_block().ops()) ops.push_back(op);
    }
    t->steps.emplace_back(StrCat("rank ", rank.rank, "'s (", CoordsToString(rank.coords), ")"),
                          std::move(ops));
  }
  return Status::OK();
}

StatusOr<std::unique_ptr<ProfileTarget>> TargetFromFlags() {
  bool layout = !FLAGS_plan.empty();
  for (const char* flag : kLayoutFlags) layout |= FlagGiven(flag);  // a layout to plan
  if (layout && !FLAGS_program.empty()) {
    return InvalidArgument("--program times one program; --plan and the layout flags "
                           "(--dp, --mp, --pp, ...) plan a preset instead");
  }
  auto t = std::make_unique<ProfileTarget>();
  if (FLAGS_program.empty()) {
    LOOM_RETURN_IF_ERROR(PlanTarget(t.get()));
    return t;
  }
  LOOM_ASSIGN_OR_RETURN(t->program, LoadProgram(FLAGS_program));
  t->what = FLAGS_program;
  std::vector<const Op*> ops;
  for (const Op* op : t->program.global_block().ops()) ops.push_back(op);
  t->steps.emplace_back("the program's", std::move(ops));
  return t;
}

// --cluster with the plan's shared cores' lockstep, into --cluster_out:
// the simulator prices compute that shares a core with another rank's at
// it. The cores' own lockstep (a rank to a core) is said, not written: it
// priced launched two-rank runs long (docs/simulator_accuracy.md), and
// loom run --interleaved_profile leaves it out under a launch too.
Status WriteSharedCoreLockstep(proto::Cluster cluster, std::optional<double> shared) {
  if (shared) {
    cluster.mutable_shared_host()->set_shared_core_lockstep(*shared);
  } else {
    std::printf(
        "no shared cores' lockstep: the plan has no more ranks than this host has "
        "cores; --cluster is written as it was\n");
  }
  LOOM_RETURN_IF_ERROR(ValidateCluster(cluster).WithContext(FLAGS_cluster_out));
  LOOM_RETURN_IF_ERROR(SaveCluster(cluster, FLAGS_cluster_out));
  std::printf("wrote %s (use it with --cluster %s)\n", FLAGS_cluster_out.c_str(),
              FLAGS_cluster_out.c_str());
  return Status::OK();
}

}  // namespace

StatusOr<PlanOpProfileOptions> PlanOpProfileOptionsFromFlags() {
  if (FLAGS_profile_samples < 1) return InvalidArgument("--profile_samples must be at least 1");
  if (FLAGS_profile_warmup < 0) return InvalidArgument("--profile_warmup must not be negative");
  PlanOpProfileOptions options;
  options.in_step = FLAGS_in_step;
  options.step.warmup_steps = FLAGS_profile_warmup;
  options.step.steps = FLAGS_profile_samples;
  options.alone.warmup_runs = FLAGS_profile_warmup;
  options.alone.samples = FLAGS_profile_samples;
  options.alone.min_sample_seconds = FLAGS_profile_min_sample_ms * 1e-3;
  options.alone.max_bytes = FLAGS_profile_max_bytes;
  options.alone.seed = static_cast<uint64_t>(FLAGS_seed);
  return options;
}

StatusOr<double> WaitForQuietCpuFromFlags() {
  if (!(FLAGS_wait_for_quiet_seconds >= 0 && FLAGS_wait_for_quiet_seconds <= 3600)) {
    return InvalidArgument("--wait_for_quiet_seconds must be 0 to 3600, got ",
                           FLAGS_wait_for_quiet_seconds);
  }
  QuietCpuWait wait;
  wait.max_seconds = FLAGS_wait_for_quiet_seconds;
  return WaitForQuietCpu(wait);
}

Status ProfileOps() {
  LOOM_ASSIGN_OR_RETURN(proto::Cluster cluster, ClusterFromFlags());
  LOOM_ASSIGN_OR_RETURN(DeviceType device_type, DeviceFromFlags());
  // The table's rows are the cluster's device's: a GPU cluster's for
  // --device cuda, this host's CPU otherwise.
  std::unique_ptr<Device> gpu;
  if (device_type == DeviceType::kCpu) {
    LOOM_RETURN_IF_ERROR(CheckCpu(cluster, "loom profile measures"));
  } else {
    if (cluster.device().kind() == proto::Device::CPU) {
      return InvalidArgument("--device ", FLAGS_device, " times GPU kernels, but --cluster ",
                             cluster.name(), " describes CPUs (give the GPUs' cluster, e.g. "
                             "--cluster h100)");
    }
    LOOM_ASSIGN_OR_RETURN(gpu, CreateCudaDevice(0));
  }
  const std::string& device = TableDevice(cluster);
  const std::string path = CostTablePathFromFlags();
  // Read first, so that a malformed table fails before minutes of timing.
  LOOM_RETURN_IF_ERROR(CostTable::LoadOrEmpty(path).status());
  LOOM_ASSIGN_OR_RETURN(PlanOpProfileOptions options, PlanOpProfileOptionsFromFlags());
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<ProfileTarget> target, TargetFromFlags());
  // The lockstep goes into a cluster file: only a plan's steps on the CPU
  // measure it. Checked before minutes of timing.
  if (!FLAGS_cluster_out.empty()) {
    if (!target->has_plan || !FLAGS_in_step || gpu != nullptr) {
      return InvalidArgument(
          "--cluster_out with ops: the cores' lockstep is measured in a "
          "plan's steps on the CPU (--plan or a layout, --in_step, "
          "--device cpu)");
    }
    LOOM_RETURN_IF_ERROR(CheckWritable(FLAGS_cluster_out));
  }

  LOOM_ASSIGN_OR_RETURN(const double pressure_before, WaitForQuietCpuFromFlags());
  const auto start = std::chrono::steady_clock::now();
  options.alone.device = gpu.get();
  options.alone_progress = [](int i, int total, const std::string& sig) {
    std::fprintf(stderr, "[alone %d/%d] %s ...\n", i, total, sig.c_str());
  };
  PlanOpProfile profile;
  if (target->has_plan) {
    // A step's ops in their context are timed on the CPU only, so far.
    options.in_step = options.in_step && gpu == nullptr;
    options.step.cache_share = RankCacheShare(cluster, target->plan.layout.world_size());
    options.step_progress = [](int step, int total) {
      std::fprintf(stderr, "[step %d/%d] ...\n", step + 1, total);
    };
    if (options.in_step) {
      std::string ranks;
      for (int rank : InStepTimedRanks(target->plan)) {
        ranks += StrCat(ranks.empty() ? "" : ", ", rank, " (",
                        CoordsToString(target->plan.ranks[rank].coords), ")");
      }
      std::fprintf(stderr, "timing rank%s %s in steps, in turns: %d + %d steps\n",
                   ranks.find(',') == std::string::npos ? "" : "s", ranks.c_str(),
                   options.step.warmup_steps, options.step.steps);
    }
    LOOM_ASSIGN_OR_RETURN(profile, ProfilePlanOps(target->config, target->plan, options));
  } else {
    LOOM_ASSIGN_OR_RETURN(profile.alone,
                          ProfileOps(DistinctSignatureOps({&target->program.global_block()}),
                                     options.alone, options.alone_progress));
  }
  const std::vector<proto::CostEntry> entries = CostEntriesOf(profile, device);
  size_t in_step_count = 0;
  if (profile.in_step) {
    const InStepProfile& in_step = *profile.in_step;
    in_step_count = in_step.timings.size();
    ReportLockstep(in_step.lockstep, in_step.shared_core_lockstep, in_step.copies, stdout);
    if (!FLAGS_cluster_out.empty()) {
      LOOM_RETURN_IF_ERROR(WriteSharedCoreLockstep(cluster, in_step.shared_core_lockstep));
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const SkippedOp& s : profile.alone.skipped) {
    std::fprintf(stderr, "skipped %s: %s\n", s.signature.c_str(), s.reason.c_str());
  }

  CostTable::MergeCounts counts;
  LOOM_ASSIGN_OR_RETURN(CostTable table, MergeIntoCostTable(path, entries, &counts));
  std::printf(
      "profiled %zu signatures of %s on '%s' (OpenBLAS's %s kernels) in %.1f s (%zu in "
      "steps, %zu alone, %zu skipped): %d added, %d replaced\nwrote %s (%d entries)\n",
      entries.size(), target->what.c_str(), device.c_str(), LoadedBlasKernels().c_str(), seconds,
      in_step_count, profile.alone.timed.size(), profile.alone.skipped.size(), counts.added,
      counts.replaced, path.c_str(), table.size());
  // Each step run op after op at the table's medians: for the serial
  // layout comparable with loom train's time_ms when nothing was skipped.
  for (const auto& [who, ops] : target->steps) {
    double serial = 0;
    int priced = 0;
    for (const Op* op : ops) {
      if (const proto::CostEntry* e = table.Find(OpSignature(*op), device)) {
        serial += e->median_seconds();
        ++priced;
      }
    }
    std::printf("sum of medians over %s %zu ops: %s (%d priced)\n", who.c_str(), ops.size(),
                Time(serial).c_str(), priced);
  }
  const std::string note = PressureNote(pressure_before);
  if (!note.empty()) std::printf("%s\n", note.c_str());
  return Status::OK();
}

}  // namespace loom
