// The `loom` command line. `loom help` lists the commands; `loom CMD --help`
// explains one.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "executor/cpu/blas_kernels.h"
#include "runtime/launch_env.h"
#include "runtime/redis_server.h"
#include "runtime/slurm_env.h"
#include "tools/command.h"
#include "tools/common_flags.h"
#include "tools/flag_groups.h"

DECLARE_string(o);
DECLARE_string(startup);
DECLARE_bool(vars);

namespace loom {

Status RunModel(const std::vector<std::string>& args);
Status RunShow(const std::vector<std::string>& args);
Status RunTrain(const std::vector<std::string>& args);
Status RunCheckpoint(const std::vector<std::string>& args);
Status RunDemo(const std::vector<std::string>& args);
Status RunOps(const std::vector<std::string>& args);
Status RunOpt(const std::vector<std::string>& args);
Status RunPasses(const std::vector<std::string>& args);
Status RunPlan(const std::vector<std::string>& args);
Status RunRun(const std::vector<std::string>& args);
Status RunLaunch(const std::vector<std::string>& args);
Status RunNetcheck(const std::vector<std::string>& args);
Status RunProfile(const std::vector<std::string>& args);
Status RunSimulate(const std::vector<std::string>& args);
Status RunTune(const std::vector<std::string>& args);

const std::vector<Command>& Commands() {
  static const std::vector<Command>* const commands = new std::vector<Command>{
      {"demo", "train gpt-tiny serially and on 4 ranks, side by side",
       "loom demo [--seed S] [--lr LR] [--optimizer adamw|sgd] [--demo_trace FILE]\n"
       "          [--demo_text FILE] [--cluster local|FILE]\n"
       "Trains the gpt-tiny preset for 200 steps on the bytes of a text every\n"
       "Debian system ships (the GPL-3 under /usr/share/common-licenses; empty\n"
       "--demo_text: the built-in synthetic dataset) twice, serially and on 4\n"
       "in-process ranks (mp=2, pp=2, 1F1B-overlap), prints both losses every 20\n"
       "steps, text the model writes before and after training, and writes the\n"
       "parallel run's trace; then simulates the same layout, its ops profiled\n"
       "between the last 30 parallel steps (a few seconds, into files of the\n"
       "demo's own: the user's cost table is neither read nor written) and its\n"
       "calls priced by --cluster's links (the local preset's, or this host's\n"
       "from a file `loom profile --comm` wrote), prints the simulated step\n"
       "beside the measured one and writes both timelines on one page\n"
       "(--demo_html).",
       FlagsOf({&kOptimizerFlags}, {"seed", "demo_trace", "demo_html", "demo_text", "cluster"}),
       RunDemo},
      {"model", "write a GPT training program (forward, backward, optimizer)",
       "loom model --preset P -o FILE [--startup FILE]\n"
       "Builds the preset's training program and writes it; a name ending\n"
       "in .pbtxt writes protobuf text format, anything else binary.",
       FlagsOf({&kModelFlags, &kOptimizerFlags, &kAmpFlags}, {"o", "startup"}),
       RunModel},
      {"show", "print a program file as a listing",
       "loom show FILE [--vars]\n"
       "One line per op: index, role, type, inputs -> outputs, the\n"
       "attributes it sets and its parallel annotations (@stage, @stream...).",
       {"vars"}, RunShow},
      {"train", "train a preset serially, printing every step",
       "loom train --preset P --steps N [--seed S] [--save_dir DIR [--save_every K]]\n"
       "           [--resume DIR]\n"
       "loom train --program FILE [--startup FILE] [--fetch VAR,...] --steps N\n"
       "Prints 'step K loss X lr R [grad_norm G] time_ms T' per step: R the\n"
       "rate it used, G the global gradient norm (with --clip_grad_norm or fp16\n"
       "loss scaling), T the step's wall time; a step fp16 skipped says so.\n"
       "--save_dir writes checkpoints (safetensors files of full tensors and a\n"
       "manifest), which --resume continues exactly, under this or any layout.\n"
       "--data FILE trains on a token file (uint16 or uint32 ids, as nanoGPT\n"
       "writes them), --text FILE on a file's bytes; the default is a built-in\n"
       "synthetic dataset. --program trains any program (loom model, loom opt,\n"
       "or by hand): tokens and labels come from the data where an embedding\n"
       "reads them, other data vars get seeded values; --fetch prints vars.",
       FlagsOf({&kModelFlags, &kOptimizerFlags, &kAmpFlags, &kDataFlags, &kTrainingLoopFlags},
               {"device", "program", "startup", "fetch", "fetch_values"}),
       RunTrain},
      {"checkpoint", "check a checkpoint and list its tensors",
       "loom checkpoint DIR [--values N]\n"
       "Loads DIR (a checkpoint, or the newest complete one of a --save_dir)\n"
       "as --resume does, verifying sizes and CRC-32s, and prints its step and\n"
       "one line per tensor: file, name, dtype, shape, sum and first values.",
       {"values"}, RunCheckpoint},
      {"ops", "list the registered ops: slots, attributes, docs, and the devices with a kernel",
       "loom ops [TYPE...]", {}, RunOps},
      {"opt", "run a pass pipeline over one rank's program and print it",
       "loom opt FILE --passes=PIPELINE [--rank R] [--dp D --mp M --pp P]\n"
       "Reads a program (binary or .pbtxt), runs the pipeline, e.g.\n"
       "'tensor-parallel{degree=2}', and prints the rewritten program, or the\n"
       "rank's plan once job programs exist. The passes take every value from\n"
       "their options ('loom passes' lists them); the degrees (or --config) only\n"
       "number the ranks --rank picks from.",
       {"passes", "rank", "config", "dp", "mp", "pp", "startup", "print_after",
        "print_after_all", "time_passes", "verify_each", "disable_passes", "dump_dir",
        "explain", "vars", "o"},
       RunOpt},
      {"plan", "print each rank's job list and programs for a strategy",
       "loom plan --preset P --dp D --mp M --pp S --micro_batches N --schedule NAME\n"
       "          [--vpp V] [--config FILE] [--rank R] [--json] [--explain] [-o FILE]\n"
       "Builds the preset's training program, runs the default pass pipeline\n"
       "for every rank (or only --rank R) and prints each rank's job list and\n"
       "the op count of each job program; --json prints one document with\n"
       "every program's ops. -o saves the whole plan for 'loom run --plan'\n"
       "(binary, or text format for a .pbtxt name). With --cluster the pipeline\n"
       "cut is balanced by that cluster's op costs (the profiled table, see\n"
       "'loom profile'), else by FLOPs.",
       FlagsOf({&kModelFlags, &kOptimizerFlags, &kStrategyFlags, &kMemoryFlags},
               {"cluster", "cost_table", "rank", "all_ranks", "json", "explain", "verify_each", "o"}),
       RunPlan},
      {"run", "train under a parallel strategy, all ranks in this process",
       "loom run --preset P --dp D --mp M --pp S --micro_batches N --schedule NAME\n"
       "         --steps K [--seed S] [--trace FILE] [--config FILE]\n"
       "loom run --plan FILE --steps K [--trace FILE]\n"
       "loom run --program FILE --startup FILE --dp D --mp M ... --steps K\n"
       "Plans every rank, or loads a plan 'loom plan -o' saved (which fixes the\n"
       "model, layout and schedule: their flags are then errors); verifies it,\n"
       "runs each rank's streams on CPU threads (rank r's on the host's core r\n"
       "mod cores: --pin_cores) and their communication over Gloo on loopback,\n"
       "and prints 'step K loss X lr R [grad_norm G] time_ms T' per step: the\n"
       "global batch's mean loss, the same quantity as loom train; at the end,\n"
       "'steps 2-K: median step time T, coefficient of variation C'. --trace\n"
       "writes the last step as Chrome trace JSON (one process per rank, one\n"
       "thread per stream; open it in Perfetto). --save_dir and --resume\n"
       "checkpoint as loom train does; a checkpoint of any layout resumes here.\n"
       "--program plans a program file (from loom model, say) instead of a\n"
       "preset; it must read token ids and labels, which the data feeds.",
       FlagsOf({&kModelFlags, &kOptimizerFlags, &kStrategyFlags, &kMemoryFlags, &kDataFlags,
                &kTrainingLoopFlags},
               {"device", "plan", "program", "startup", "cluster", "cost_table", "trace",
                "comm_timeout", "stream_priorities", "pin_cores", "interleaved_profile",
                "profile_warmup", "interleaved_core_wait_calls", "interleaved_cluster_out",
                "comm_core_wait_bytes"}),
       RunRun},
      {"launch", "start N processes of a command, one rank each",
       "loom launch --nproc N [--net_rate RATE] -- loom run ARGS...\n"
       "loom launch --nproc N --rdzv_backend redis --rdzv_endpoint HOST:PORT\n"
       "            [--job_id ID] -- loom run ARGS...\n"
       "loom launch --nnodes K --node_rank R --nproc_per_node N --rdzv_backend redis\n"
       "            --rdzv_endpoint HOST:PORT --job_id ID -- loom run ARGS...   (on each node)\n"
       "Starts N copies with LOOM_RANK, LOOM_WORLD_SIZE and LOOM_STORE_DIR\n"
       "set; they meet through a file store in a fresh directory, or in a\n"
       "redis-server (Gloo's RedisStore) under keys prefixed by the job id. If one\n"
       "fails, the others are stopped and the failing rank is named.\n"
       "--net_rate (root; ip and tc of iproute2) runs each rank in a network\n"
       "namespace of its own whose link to a shared bridge is shaped to RATE\n"
       "each way (tc syntax: 200mbit, 1gbit), so that communication takes wall\n"
       "time but no CPU; the rank binds to LOOM_HOST, its address there. The\n"
       "network is removed when launch ends, fails or is interrupted.\n"
       "A launched loom command renews a heartbeat every second; a rank that\n"
       "stops renewing it (stopped, frozen) for --heartbeat_timeout seconds\n"
       "is named and the launch stopped, long before a peer's collective\n"
       "would time out.",
       {"nproc", "nproc_per_node", "nnodes", "node_rank", "net_rate", "net_burst", "net_queue",
        "heartbeat_timeout", "rdzv_backend", "rdzv_endpoint", "job_id"},
       RunLaunch},
      {"netcheck", "measure the network between the ranks of a launch",
       "loom launch --nproc N [--net_rate RATE] -- loom netcheck [--bytes B] [--repeats K]\n"
       "Rank 0 sends B bytes to rank 1, then all ranks all-reduce B bytes, K\n"
       "times each; rank 0 prints the send rate and the all-reduce bus rate\n"
       "(MB/s, 1e6 bytes) and each rank's CPU and wall seconds over both phases.\n"
       "To fit the link into a cluster file, run loom profile --comm under the\n"
       "same launch.",
       {"bytes", "repeats", "comm_timeout"},
       RunNetcheck},
      {"simulate", "time one step of a layout or a saved plan on a cluster's cost model",
       "loom simulate --preset P --dp D --mp M --pp S --micro_batches N --schedule NAME\n"
       "              [--cluster NAME|FILE] [--cost_table FILE] [--json] [--trace FILE]\n"
       "              [--html FILE] [--compare TRACE] [--against SCHEDULE]\n"
       "loom simulate --plan FILE [--cluster ...] ...\n"
       "Plans one rank per pipeline stage (its tensor- and data-parallel peers\n"
       "run the same ops), lowers the plan to the ExecutionGraph the executor\n"
       "runs, and simulates one step of every rank with op times from the\n"
       "cluster's cost model (profiled table, else a scaled neighbour, else the\n"
       "roofline; 'loom profile' fills the table) and alpha-beta communication.\n"
       "Prints step time, the calc stream's bubble, exposed communication per\n"
       "kind and peak memory, overall and per rank. --json prints them as one\n"
       "document, --trace writes the simulated step as Chrome JSON, --html a\n"
       "timeline page, and --compare TRACE (from 'loom run --trace' of the same\n"
       "layout) prints where the simulated and the measured step differ and\n"
       "puts both timelines on the page. --against SCHEDULE simulates the same\n"
       "layout under SCHEDULE too and prints the gain, the exposed communication\n"
       "and the peak memory of both (e.g. --schedule 1F1B-overlap --against 1F1B);\n"
       "the page then draws both timelines, one above the other.\n"
       "The GPT-3 presets take their recipe where flags do not say (--recipe):\n"
       "bf16 O2, clip 1.0, micro-batches of one sequence per dp replica.",
       FlagsOf({&kModelFlags, &kOptimizerFlags, &kStrategyFlags},
               {"plan", "cluster", "cost_table", "memory_limit", "json", "trace", "html",
                "compare", "against", "fold_dp", "rank_rows"}),
       RunSimulate},
      {"tune", "find the fastest strategy that fits, by simulating the strategy space",
       "loom tune --preset P --devices N [--cluster NAME|FILE] [--memory_limit BYTES]\n"
       "          [--top K] [--explain] [--profile_ops --cost_table FILE] [-o plan.pb]\n"
       "Searches dp x mp x pp over N devices, micro-batch counts, the pipeline\n"
       "schedules (VPP up to --max_vpp chunks), ZeRO stages, recomputation,\n"
       "sequence parallelism and op-split; AMP and the other strategy settings\n"
       "stay as --config and the pass flags give them. Rules drop what cannot\n"
       "work before anything is planned: divisibility, and a lower bound on\n"
       "memory (parameters and optimizer state) against --memory_limit (default:\n"
       "the cluster's device memory). The rest is simulated on the cluster's\n"
       "cost model, cheapest time bound first, --tune_threads at a time; a\n"
       "candidate is skipped once its time bound cannot beat the top K found, or\n"
       "once the same plan with less recomputation fits. Then the winner's finer\n"
       "knobs are turned one at a time (--refine, on by default): the fewest\n"
       "recomputed layers that fit, the gradient bucket size, ZeRO's fetch mode,\n"
       "and under stage 3 the prefetch depth and the buckets kept gathered; a\n"
       "value is taken only if it steps 0.5% faster. Prints the top K plans\n"
       "(step time, tokens/s, MFU, peak memory, exposed communication, bubble)\n"
       "and how many candidates each rule pruned; --explain says, knob by knob,\n"
       "what the winner's neighbours did; -o saves the winner's plan for\n"
       "'loom run --plan'. --search_seconds stops a long search early with the\n"
       "best plans found by then. --json prints the report as one document,\n"
       "every simulated plan with its strategy in the text format --config reads.\n"
       "--profile_ops first fills --cost_table on this host's CPU (a CPU --cluster)\n"
       "with every op the candidates run that it lacks, each timed inside the\n"
       "steps of the plainest candidate that runs it (no recomputation before\n"
       "recomputation, a lower ZeRO stage before a higher), as 'loom profile'\n"
       "times one layout, --profile_rounds times over the plans (each plan's\n"
       "fastest round is kept, with a warning when the host's noise moved the\n"
       "rounds apart); a table that has them all is left as it is. Timing waits\n"
       "first, up to --wait_for_quiet_seconds, for other processes to leave the CPU.",
       FlagsOf({&kModelFlags, &kOptimizerFlags, &kStrategyFlags, &kMemoryFlags,
                &kOpTimingFlags, &kQuietWaitFlags},
               {"devices", "top", "tune_threads", "schedules", "max_vpp", "exhaustive",
                "list_candidates", "search_seconds", "refine", "explain", "json", "o",
                "cluster", "cost_table", "profile_ops", "profile_rounds"}),
       RunTune},
      {"profile", "time ops (or this host's links) into the cost model's files",
       "loom profile [--preset P | --program FILE] [--cost_table FILE]\n"
       "loom profile --preset P --dp D --mp M --pp S --micro_batches N --schedule NAME\n"
       "             [--vpp V] [--config FILE] [--cost_table FILE]\n"
       "loom profile --plan FILE [--cost_table FILE]\n"
       "loom profile --comm [--calibrate_device] [--cluster_out FILE]\n"
       "loom launch --nproc N [--net_rate R] -- loom profile --comm --cluster C --cluster_out FILE\n"
       "loom launch --nproc 2N [--net_rate R] -- loom profile --comm_shared_only --cluster C\n"
       "             --cluster_out FILE\n"
       "Times every distinct op signature of the serial training program, or,\n"
       "given a layout or a saved plan, of every job program of the plan (the\n"
       "micro-batch slices, tensor-parallel shards and accumulation ops a\n"
       "parallel run executes; communication is left to the communication\n"
       "model), on this host's CPU kernels (warm-up, then the median of the\n"
       "samples) and merges the results into the cost table: an entry with the\n"
       "same signature and device is replaced. --comm times Gloo allreduce, allgather and\n"
       "send/recv on loopback the way a step makes them (--comm_between_ms of\n"
       "compute before each call, the parties arriving together and apart),\n"
       "fits the link's alpha and beta, measures how much communication and\n"
       "compute slow each other, and writes a cluster file; under loom launch\n"
       "it fits the link between the launched ranks instead (on the emulated\n"
       "network, its inter-node link);\n"
       "--calibrate_device adds the CPU's sgemm rate, copy bandwidth, per-op\n"
       "overhead, last-level cache and what an op pays to read past it to it,\n"
       "and prints how far one core's sgemm rate moves over --calibrate_seconds\n"
       "(the host's own noise); --comm_core_wait_calls N\n"
       "(0: off, the default) how long calls wait for pinned cores that compute\n"
       "(the cluster's core_wait), among in-process ranks or a launch's. Where two\n"
       "ranks share each core, a call beside another rank's call costs more:\n"
       "--comm on in-process ranks also times two groups calling at once on the\n"
       "same cores (--comm_shared_between_ms; the link's shared_cores), and\n"
       "--comm_shared_only measures only that, for a launch's two halves (on the\n"
       "emulated network after its --comm), into the file's measured link.\n"
       "--comm_idle_ms G1,G2 also times the calls after longer compute and\n"
       "records what they add (the link's after_idle).\n"
       "Every measurement waits first, up to --wait_for_quiet_seconds, for other\n"
       "processes to leave the CPU: timings taken beside them would price every\n"
       "plan after as if this host were slower.",
       FlagsOf({&kModelFlags, &kOptimizerFlags, &kStrategyFlags, &kOpTimingFlags,
                &kQuietWaitFlags},
               {"device", "program", "plan", "cluster", "cost_table", "comm", "calibrate_device",
                "calibrate_seconds", "cluster_out", "comm_ranks", "comm_between_ms", "comm_rounds",
                "comm_max_bytes", "comm_long_bytes", "comm_core_wait_calls", "comm_core_wait_bytes",
                "comm_shared_between_ms", "comm_shared_only", "comm_idle_ms",
                "interference_seconds"}),
       RunProfile},
      {"passes", "list the registered passes and their options",
       "loom passes", {}, RunPasses},
  };
  return *commands;
}

void PrintCommandHelp(const Command& command) {
  std::printf("%s\n", command.usage);
  if (command.flags.empty()) return;
  std::printf("\nflags (each also settable as the environment variable "
              "FLAGS_<name>):\n");
  for (const char* name : command.flags) {
    gflags::CommandLineFlagInfo info;
    if (!gflags::GetCommandLineFlagInfo(name, &info)) continue;
    std::string value = info.default_value;
    if (info.type == "double") value = loom::StrCat(std::stod(value));
    if (value.empty()) value = "\"\"";
    std::printf("  --%-12s %s (default: %s)\n", name, info.description.c_str(),
                value.c_str());
  }
}

namespace {

void PrintUsage() {
  std::printf("usage: loom COMMAND [flags]\n\ncommands:\n");
  for (const Command& c : Commands()) std::printf("  %-8s %s\n", c.name, c.summary);
  std::printf("\n'loom help COMMAND' or 'loom COMMAND --help' explains one.\n");
}

const Command* FindCommand(const std::string& name) {
  for (const Command& c : Commands()) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

bool WantsHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h") ||
        !std::strcmp(argv[i], "-help")) {
      return true;
    }
  }
  return false;
}

// A flag on the command line that another command reads but this one does
// not is refused by name: it would otherwise be accepted and ignored. Flags
// that no command lists (glog's --v, gflags' --flagfile) pass. Arguments
// after "--" (loom launch's command) are not this command's.
Status CheckFlagsAreTheCommands(const Command& command, int argc, char** argv) {
  std::set<std::string_view> any_command, this_command(command.flags.begin(),
                                                       command.flags.end());
  for (const Command& c : Commands()) any_command.insert(c.flags.begin(), c.flags.end());
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    std::string name(arg.substr(0, arg.find('=')));
    gflags::CommandLineFlagInfo info;
    if (!gflags::GetCommandLineFlagInfo(name.c_str(), &info) && name.rfind("no", 0) == 0) {
      name = name.substr(2);  // --noflag of a bool
    }
    if (any_command.count(name) && !this_command.count(name)) {
      return InvalidArgument("--", name, " is not a flag of 'loom ", command.name, "' ('loom ",
                             command.name, " --help' lists its flags)");
    }
  }
  return Status::OK();
}

}  // namespace
}  // namespace loom

namespace loom {

// Where OpenBLAS did not recognise this CPU and chose kernels that leave
// its AVX2 or AVX-512 units idle (3.5x slower matmuls on one host), runs
// this binary again asking for better ones; OPENBLAS_CORETYPE set by the
// user (or by this) is left alone. Quietly: `loom profile` names the
// kernels it timed.
void RunAgainWithBetterBlasKernels(char** argv) {
  const char* chosen = std::getenv("OPENBLAS_CORETYPE");
  if (chosen != nullptr && *chosen != '\0') return;
  const std::optional<std::string> better =
      BetterBlasKernels(LoadedBlasKernels(), HostVectorUnits());
  if (!better.has_value()) return;
  setenv("OPENBLAS_CORETYPE", better->c_str(), 1);
  execv("/proc/self/exe", argv);
  // Not fatal: the slower kernels compute the same results.
  std::fprintf(stderr, "loom: could not run again with OPENBLAS_CORETYPE=%s (%s); OpenBLAS "
               "keeps its %s kernels\n", better->c_str(), std::strerror(errno),
               LoadedBlasKernels().c_str());
}

}  // namespace loom

int main(int argc, char** argv) {
  using loom::Command;
  loom::RunAgainWithBetterBlasKernels(argv);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  if (argc < 2) {
    loom::PrintUsage();
    return 2;
  }
  std::string name = argv[1];
  if (name == "help" || name == "--help" || name == "-h") {
    const Command* c = argc > 2 ? loom::FindCommand(argv[2]) : nullptr;
    if (c != nullptr) {
      loom::PrintCommandHelp(*c);
    } else {
      loom::PrintUsage();
    }
    return 0;
  }
  const Command* command = loom::FindCommand(name);
  if (command == nullptr) {
    std::fprintf(stderr, "loom: unknown command '%s'; 'loom help' lists them\n",
                 name.c_str());
    return 2;
  }
  // Parse the command's arguments as if it were its own program.
  int cargc = argc - 1;
  char** cargv = argv + 1;
  if (loom::WantsHelp(cargc, cargv)) {
    loom::PrintCommandHelp(*command);
    return 0;
  }
  if (loom::Status own = loom::CheckFlagsAreTheCommands(*command, cargc, cargv); !own.ok()) {
    std::fprintf(stderr, "loom %s: %s\n", command->name, own.message().c_str());
    return 2;
  }
  if (loom::Status env = loom::ApplyFlagsFromEnvironment(); !env.ok()) {
    std::fprintf(stderr, "loom %s: %s\n", command->name, env.message().c_str());
    return 1;
  }
  gflags::ParseCommandLineFlags(&cargc, &cargv, /*remove_flags=*/true);
  std::vector<std::string> args(cargv + 1, cargv + cargc);
  // A rank of a launch shows it is alive for as long as it runs; rank 0 of
  // a Slurm step keeps its peers' store for as long. (An environment in
  // error is the command's to report.)
  std::unique_ptr<loom::Heartbeat> heartbeat;
  std::unique_ptr<loom::RedisServer> step_store;
  if (auto launched = loom::LaunchEnvFromEnvironment();
      launched.ok() && launched->has_value() && std::strcmp(command->name, "launch") != 0) {
    const loom::LaunchEnv& env = **launched;
    if (!env.store_dir.empty()) {
      heartbeat = std::make_unique<loom::Heartbeat>(loom::HeartbeatPath(env.store_dir, env.rank));
    }
    if (env.starts_store) {
      auto started = loom::StartSlurmStepStore(env);
      if (!started.ok()) {
        std::fprintf(stderr, "loom %s: %s\n", command->name, started.status().message().c_str());
        return 1;
      }
      step_store = std::move(started).value();
    }
  }
  loom::Status status = command->run(args);
  if (!status.ok()) {
    std::fprintf(stderr, "loom %s: %s\n", command->name,
                 status.message().c_str());
    return 1;
  }
  return 0;
}
