// loom run: trains under a parallel strategy, or runs a saved plan
// (--plan). All ranks run in this process by default; under `loom launch`
// (runtime/launch_env.h) this process runs its one rank, meets the others
// through a file store and binds its sockets to LOOM_HOST when given.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "cost_model/cluster.h"
#include "framework/file_util.h"
#include "framework/serialization.h"
#include "framework/verifier.h"
#include "runtime/gpt_plan.h"
#include "runtime/launch_env.h"
#include "runtime/parallel_trainer.h"
#include "runtime/program_trainer.h"
#include "runtime/straggler_watch.h"
#include "scheduler/temporary_timeline.h"
#include "scheduler/trace.h"
#include "tools/command.h"
#include "tools/common_flags.h"
#include "tools/flag_groups.h"
#include "tools/interleaved_profile_files.h"
#include "tools/profile_util.h"

DEFINE_string(trace, "",
              "write a Chrome trace (Perfetto) of the last step here, with each rank's "
              "temporaries over the step as a counter track");
DEFINE_int32(comm_timeout, 60, "seconds a rank waits for a peer before failing");
DEFINE_int32(straggler_window, 20,
             "steps per comparison of each rank's kernel time with its stage's other ranks'; a "
             "rank slower by --straggler_ratio in two windows in a row is named (0: off)");
DEFINE_double(straggler_ratio, 1.25,
              "how much longer than its peers' median a rank's median kernel time must be to "
              "name it a straggler");
DECLARE_string(startup);  // cmd_model.cc
DEFINE_string(plan, "", "run this saved plan (loom plan -o) instead of planning one");
DEFINE_bool(stream_priorities, false,
            "communication streams outrank calc on the CPU (calc threads at nice 5) when every "
            "rank of the host can have a core; not given: on for plans that run communication "
            "under compute (1F1B-overlap, op-split, pipelines' sends), off for the others");

DEFINE_bool(interleaved_profile, false,
            "after each step, time the plan's ops in one step of each rank as `loom profile "
            "--plan` does (the ranks in turns, communication local), and merge their medians "
            "over the steps after --profile_warmup into --cost_table: the run's step times and "
            "the table then come from the same seconds of the host, whose speed may move by "
            "tens of % within seconds (scripts/simulator_accuracy.sh); CPU runs only. Under "
            "loom launch the process of rank 0 profiles while the others wait at a barrier, "
            "and a step's time_ms is the whole step's, from the barrier that started it to the "
            "one that found every process done");
DECLARE_int32(profile_warmup);  // cmd_profile_ops.cc
DEFINE_int32(interleaved_core_wait_calls, 0,
             "--interleaved_profile in one process: after each step past --profile_warmup, "
             "also time this many all-reduces beside each length of compute burst on two "
             "pinned ranks (as loom profile --comm_core_wait_calls does), their fit written "
             "as --interleaved_cluster_out's core_wait; one process only; 0: not timed");
DEFINE_string(interleaved_cluster_out, "",
              "--interleaved_profile: write --cluster here with the run's lockstep slowdown "
              "(ranks on two cores or more wait for the slower one; measured when the profile "
              "runs copies side by side; not under loom launch), its shared_core_lockstep "
              "where the plan has more ranks than cores and the cluster has no core_wait (the "
              "same with two copies on each core) and --interleaved_core_wait_calls' "
              "core_wait; under loom launch rank 0's process writes it");
DECLARE_int64(comm_core_wait_bytes);  // profile_comm.cc

DEFINE_bool(pin_cores, true,
            "on the CPU, keep each rank's threads to one core (rank r to the (r mod n)th of the "
            "n cores this process may use), as the local and emulated clusters assume; turn it "
            "off when other multi-rank runs share the host, or they pin to the same cores");

namespace loom {
namespace {

// With --plan the file decides the layout and schedule (and what fitting
// under --memory_limit would change), the model and its optimizer.
Status CheckNoPlanFlags() {
  for (const char* flag : FlagsOf({&kLayoutFlags}, {"memory_limit"})) {
    if (FlagGiven(flag)) {
      return InvalidArgument("--", flag, " cannot be used with --plan: the plan fixes the "
                             "layout and schedule");
    }
  }
  for (const char* flag : FlagsOf({&kFixedByProgramFlags}, {"seed"})) {
    if (FlagGiven(flag)) {
      return InvalidArgument("--", flag, " cannot be used with --plan: the plan fixes the "
                             "model and its optimizer");
    }
  }
  return Status::OK();
}

// The trainer for --program: the loaded program planned under the flags'
// strategy. Only its token feed is known ([batch, seq] ids looked up in an
// embedding, and their labels), so that is what the trainer is told of.
StatusOr<std::unique_ptr<ParallelTrainer>> MakeProgramTrainer(ParallelTrainer::Options options,
                                                              int launched_world) {
  if (!FLAGS_plan.empty()) return InvalidArgument("--program and --plan: give one");
  for (const char* flag : kFixedByProgramFlags) {
    if (FlagGiven(flag)) {
      return InvalidArgument("--", flag, " cannot be used with --program: the program fixes "
                             "the model and its optimizer");
    }
  }
  if (FLAGS_startup.empty()) {
    return InvalidArgument("--program needs --startup under loom run: each rank initializes "
                           "its shard of the parameters from it");
  }
  LOOM_ASSIGN_OR_RETURN(Program main, LoadProgram(FLAGS_program));
  LOOM_ASSIGN_OR_RETURN(Program startup, LoadProgram(FLAGS_startup));
  LOOM_RETURN_IF_ERROR(VerifyProgram(main).WithContext(FLAGS_program));
  LOOM_RETURN_IF_ERROR(VerifyProgram(startup).WithContext(FLAGS_startup));
  const TokenFeed feed = TokenFeedOf(main);
  if (feed.vocab == 0) {
    return InvalidArgument(FLAGS_program, ": loom run feeds only token ids and their labels "
                           "(data vars '", kTokensVar, "' and '", kLabelsVar, "', the ids "
                           "looked up in an embedding), which this program does not read; "
                           "loom train --program runs any program");
  }
  LOOM_ASSIGN_OR_RETURN(proto::Strategy strategy, StrategyFromFlags());
  if (launched_world > 0) LOOM_RETURN_IF_ERROR(ValidateStrategy(strategy, launched_world));
  GptConfig batches;
  batches.name = FLAGS_program;
  batches.vocab_size = feed.vocab;
  batches.seq_len = feed.seq_len;
  batches.batch_size = main.global_block().FindVar(kTokensVar)->shape(0);
  batches.seed = FLAGS_seed;
  PlanOptions plan_options;
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CostContext> costs,
                        RunPlanningCostsFromFlags(&plan_options));
  StatusOr<Plan> plan = PlanRanks(main, startup, strategy, {}, plan_options);
  if (!plan.ok()) return plan.status().WithContext(FLAGS_program);
  LOOM_ASSIGN_OR_RETURN(options.data, DatasetFromFlags(feed.vocab, feed.seq_len, FLAGS_seed));
  options.model_record = ProgramRecord(main);
  return ParallelTrainer::CreateFromPlan(batches, std::move(*plan), FLAGS_program, options);
}

// The trainer for --program, --plan, or a plan made from the flags.
StatusOr<std::unique_ptr<ParallelTrainer>> MakeTrainer(ParallelTrainer::Options options,
                                                       int launched_world) {
  if (!FLAGS_program.empty()) return MakeProgramTrainer(std::move(options), launched_world);
  if (FLAGS_plan.empty()) {
    LOOM_ASSIGN_OR_RETURN(proto::Strategy strategy, StrategyFromFlags());
    LOOM_ASSIGN_OR_RETURN(GptConfig config, GptConfigFromFlags());
    LOOM_ASSIGN_OR_RETURN(OptimizerConfig opt, OptimizerConfigFromFlags());
    if (launched_world > 0) LOOM_RETURN_IF_ERROR(ValidateStrategy(strategy, launched_world));
    PlanOptions plan_options;
    LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CostContext> costs,
                          RunPlanningCostsFromFlags(&plan_options));
    std::string memory_note;
    LOOM_RETURN_IF_ERROR(FitToMemoryFromFlags(config, opt, &strategy, &memory_note, plan_options));
    if (!memory_note.empty()) PrintNote(memory_note);
    LOOM_ASSIGN_OR_RETURN(options.data, DatasetFromFlags(config));
    options.costs = costs.get();
    return ParallelTrainer::Create(config, opt, strategy, options);
  }
  LOOM_RETURN_IF_ERROR(CheckNoPlanFlags());
  LOOM_ASSIGN_OR_RETURN(Plan plan, LoadPlan(FLAGS_plan));
  StatusOr<GptConfig> config = GptConfigOfPlan(plan);
  if (!config.ok()) return config.status().WithContext(FLAGS_plan);
  const int world = plan.layout.world_size();
  if (launched_world > 0 && world != launched_world) {
    return InvalidArgument(FLAGS_plan, ": the plan has ", world, " ranks but loom launch started ",
                           launched_world);
  }
  LOOM_ASSIGN_OR_RETURN(options.data, DatasetFromFlags(*config));
  return ParallelTrainer::CreateFromPlan(*config, std::move(plan), FLAGS_plan, options);
}

// Each local rank's most device memory held at once over the run (its
// temporaries: activations, gradients, buffers), as its allocator counted
// it, to set beside loom simulate's peak; nothing where the device does not
// count.
void PrintDeviceMemory(ParallelTrainer& trainer) {
  std::string line;
  for (int r : trainer.local_ranks()) {
    const int64_t peak = trainer.rank_device(r).Memory().peak_bytes;
    if (peak == 0) continue;
    line += StrCat(line.empty() ? "" : ", ", "rank ", r, " ",
                   StrCat(std::round(peak / 1e4) / 100), " MB");
  }
  if (!line.empty()) std::printf("device memory high-water (allocator): %s\n", line.c_str());
}

// Where in the traced step each rank held the most temporaries, and what:
// the allocator's figure says how much, this says why.
void PrintTracedPeaks(const ExecutionGraph& graph,
                      const std::vector<TemporaryTimeline>& timelines) {
  for (const TemporaryTimeline& timeline : timelines) {
    for (const RankGraph& rank : graph.ranks) {
      if (rank.rank != timeline.rank) continue;
      std::printf("traced step's peak of temporaries: rank %d %s\n", rank.rank,
                  DescribePeak(rank, timeline).c_str());
    }
  }
}

// --interleaved_profile's profile, and `*files` where it goes; null when
// the flag is not given.
StatusOr<std::unique_ptr<InterleavedProfile>> InterleavedProfileFromFlags(
    const ParallelTrainer& trainer, const std::optional<LaunchEnv>& launched,
    InterleavedProfileFiles* files) {
  if (!FLAGS_interleaved_profile) {
    for (const char* flag : {"interleaved_core_wait_calls", "interleaved_cluster_out"}) {
      if (FlagGiven(flag)) return InvalidArgument("--", flag, " needs --interleaved_profile");
    }
    return std::unique_ptr<InterleavedProfile>();
  }
  if (FLAGS_interleaved_core_wait_calls < 0) {
    return InvalidArgument("--interleaved_core_wait_calls must not be negative, got ",
                           FLAGS_interleaved_core_wait_calls);
  }
  if (FLAGS_interleaved_core_wait_calls > 0 && FLAGS_interleaved_cluster_out.empty()) {
    return InvalidArgument("--interleaved_core_wait_calls needs --interleaved_cluster_out, the "
                           "cluster file its fit is written to");
  }
  if (FLAGS_device != "cpu") return InvalidArgument("--interleaved_profile times CPU runs only");
  if (FLAGS_profile_warmup < 0) return InvalidArgument("--profile_warmup must not be negative");
  if (FLAGS_steps <= FLAGS_profile_warmup) {
    return InvalidArgument("--interleaved_profile needs more --steps (", FLAGS_steps,
                           ") than --profile_warmup (", FLAGS_profile_warmup, ")");
  }
  LOOM_ASSIGN_OR_RETURN(proto::Cluster cluster, ClusterFromFlags());
  LOOM_RETURN_IF_ERROR(CheckCpu(cluster, "--interleaved_profile measures"));
  InterleavedProfileOptions o;
  o.warmup_steps = FLAGS_profile_warmup;
  o.steps = FLAGS_steps - FLAGS_profile_warmup;
  o.launch = launched;
  o.timeout = std::chrono::seconds(FLAGS_comm_timeout);
  o.core_wait_calls = FLAGS_interleaved_core_wait_calls;
  o.core_wait_bytes = FLAGS_comm_core_wait_bytes;
  o.cluster = cluster;
  files->cost_table = CostTablePathFromFlags();
  files->device = TableDevice(cluster);
  files->cluster_out = FLAGS_interleaved_cluster_out;
  LOOM_RETURN_IF_ERROR(CheckInterleavedProfileFiles(o, *files));
  return InterleavedProfile::Create(trainer, o);
}

// Across nodes, Megatron's placement keeps each tensor-parallel group
// inside one node: its all-reduces in every layer need the fast link. A
// note names a layout whose mp groups span nodes (nodes hold consecutive
// ranks, as many each).
std::string MpAcrossNodesNote(const ParallelLayout& layout, const LaunchEnv& launched) {
  if (launched.nodes <= 1 || layout.mp <= 1) return "";
  const int per_node = launched.world_size / launched.nodes;
  for (int r = 0; r < layout.world_size(); ++r) {
    const std::vector<int> mp = RingMembers(layout, r, kMpRing);
    for (int member : mp) {
      if (member / per_node == r / per_node) continue;
      return StrCat("mp group of ranks ", r, " and ", member, " spans nodes (", per_node,
                    " ranks each): its all-reduces cross the link between nodes; mp up to ",
                    per_node, " that divides it keeps each group inside a node");
    }
  }
  return "";
}

}  // namespace

Status RunRun(const std::vector<std::string>& args) {
  if (!args.empty()) return InvalidArgument("unexpected argument '", args[0], "'");
  if (FLAGS_steps <= 0) return InvalidArgument("--steps must be positive");
  if (FLAGS_comm_timeout <= 0) return InvalidArgument("--comm_timeout must be positive");
  ParallelTrainer::Options options;
  options.comm.timeout = std::chrono::seconds(FLAGS_comm_timeout);
  options.trace = !FLAGS_trace.empty();
  if (FlagGiven("stream_priorities")) options.stream_priorities = FLAGS_stream_priorities;
  options.pin_cores = FLAGS_pin_cores;
  options.time_kernels = FLAGS_straggler_window > 0;
  LOOM_ASSIGN_OR_RETURN(options.device, DeviceFromFlags());
  std::string trace_path = FLAGS_trace;
  int launched_world = 0;
  std::filesystem::path handover_root;
  LOOM_ASSIGN_OR_RETURN(std::optional<LaunchEnv> launched, LaunchEnvFromEnvironment());
  if (launched.has_value()) {
    launched_world = launched->world_size;
    // Across machines the shards of a checkpoint are handed over beside
    // it, in --save_dir, which every node must see (a shared file system,
    // as a cluster's checkpoints are); on one machine, in the launch's
    // store directory.
    if (!FLAGS_save_dir.empty() && (launched->nodes > 1 || launched->store_dir.empty())) {
      handover_root =
          std::filesystem::path(FLAGS_save_dir) / StrCat(".handover-", launched->job_id);
      // One folder a start of the job: a rank of a failed start that has
      // not yet stopped cannot hand over to this one.
      options.handover_dir = (handover_root / StrCat("start-", launched->restart)).string();
      // What the job's earlier starts left mid-checkpoint: cleared before
      // any step, so before any rank of this start can hand over.
      std::error_code ignored;
      if (launched->rank == 0) std::filesystem::remove_all(handover_root, ignored);
    }
    options.local_ranks = {launched->rank};
    const std::chrono::milliseconds timeout = options.comm.timeout;
    options.comm = LaunchCommOptions(*launched, "loom");
    options.comm.timeout = timeout;
    if (!trace_path.empty()) trace_path += StrCat(".rank", launched->rank, ".json");
  }
  // Before any step: an output that cannot be written fails now, not after
  // the run.
  if (!trace_path.empty()) LOOM_RETURN_IF_ERROR(CheckWritable(trace_path).WithContext("--trace"));
  LOOM_ASSIGN_OR_RETURN(auto trainer, MakeTrainer(options, launched_world));
  if (launched.has_value() && launched->rank == 0) {
    const std::string note = MpAcrossNodesNote(trainer->plan().layout, *launched);
    if (!note.empty()) PrintNote(note);
  }
  if (FLAGS_straggler_window < 0 || !(FLAGS_straggler_ratio > 1)) {
    return InvalidArgument("--straggler_window must be 0 or more and --straggler_ratio above 1");
  }
  // Launched ranks compare their kernel times over a world of them all.
  std::unique_ptr<CommWorld> straggler_world;
  Communicator* all_ranks = nullptr;
  if (launched.has_value() && FLAGS_straggler_window > 0) {
    LOOM_ASSIGN_OR_RETURN(straggler_world,
                          LaunchWorld(*launched, "stragglers", options.comm.timeout));
    LOOM_ASSIGN_OR_RETURN(all_ranks, straggler_world->Get(kDpRing));
  }
  StragglerTracker stragglers(*trainer, all_ranks,
                              {FLAGS_straggler_window, FLAGS_straggler_ratio, /*windows=*/2},
                              [](const std::string& line) {
                                std::fprintf(stderr, "loom run: %s\n", line.c_str());
                              });
  Status straggler_status;
  InterleavedProfileFiles profile_files;
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<InterleavedProfile> profile,
                        InterleavedProfileFromFlags(*trainer, launched, &profile_files));
  // Only the process holding the loss prints it, so a launch prints each
  // step once, as the in-process run does.
  Status profile_status;
  StepTimeSummary step_times;
  auto on_step = [&](const StepReport& r) {
    StepReport shown = r;
    if (profile != nullptr && profile_status.ok()) profile_status = profile->Step(&shown.ms);
    if (straggler_status.ok()) straggler_status = stragglers.AfterStep(r.step);
    if (!std::isnan(r.loss)) {
      PrintStep(shown);
      step_times.Add(shown);
    }
    if (options.trace && r.step + 1 < FLAGS_steps) trainer->TakeTrace();  // keep the last
  };
  TrainingLoopOptions loop = TrainingLoopOptionsFromFlags();
  // Restarted by loom launch --max_restarts: on from the newest checkpoint.
  loop.resume_from_save_dir = launched.has_value() && launched->restart > 0;
  // The loop's notes (resumed from, saved) are the same on every rank of a
  // launch: one line a node.
  auto on_note = [&](const std::string& note) {
    if (!launched.has_value() || launched->local_rank == 0) PrintNote(note);
  };
  LOOM_RETURN_IF_ERROR(RunTrainingLoop(*trainer, loop, on_step, on_note));
  // Rank 0 has read every shard handed over by now.
  if (!handover_root.empty() && launched->rank == 0) {
    std::error_code ignored;
    std::filesystem::remove_all(handover_root, ignored);
  }
  LOOM_RETURN_IF_ERROR(profile_status.WithContext("--interleaved_profile"));
  LOOM_RETURN_IF_ERROR(straggler_status);
  step_times.Print();
  PrintDeviceMemory(*trainer);
  if (options.trace) {
    const std::vector<TraceEvent> events = trainer->TakeTrace();
    LOOM_ASSIGN_OR_RETURN(std::vector<TemporaryTimeline> timelines,
                          ReplayTracedRanks(trainer->graph(), events, ParallelTrainer::KeptVars()));
    LOOM_RETURN_IF_ERROR(WriteChromeTrace(events, trace_path, TemporaryCounters(timelines)));
    PrintTracedPeaks(trainer->graph(), timelines);
  }
  if (profile != nullptr) LOOM_RETURN_IF_ERROR(WriteInterleavedProfile(*profile, profile_files));
  return Status::OK();
}

}  // namespace loom
