// loom profile: fills the op cost table from this host's CPU kernels, or
// measures the host itself (links, interference, device rates) into a
// cluster file.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "cost_model/cluster.h"
#include "cost_model/comm_fit.h"
#include "cost_model/cost_table.h"
#include "executor/host_profiler.h"
#include "executor/op_profiler.h"
#include "framework/serialization.h"
#include "runtime/gpt_plan.h"
#include "tools/command.h"
#include "tools/common_flags.h"

DEFINE_string(program, "", "profile this program file instead of --preset's");
DECLARE_string(plan);
DEFINE_bool(comm, false,
            "measure Gloo collectives on loopback and the communication/"
            "compute interference, and write them into --cluster_out");
DEFINE_bool(calibrate_device, false,
            "measure this CPU's sgemm rate, copy bandwidth and per-op "
            "overhead, and write them into --cluster_out");
DEFINE_string(cluster_out, "",
              "cluster file --comm and --calibrate_device update (default: "
              "local.cluster.pbtxt beside the cost table)");
DEFINE_int32(profile_samples, 7, "timed samples per op; the median is kept");
DEFINE_int32(profile_warmup, 2, "untimed runs before an op's samples");
DEFINE_double(profile_min_sample_ms, 0.2,
              "each sample repeats a fast op until it lasts this long");
DEFINE_int64(profile_max_bytes, int64_t{4} << 30,
             "skip ops whose tensors total more bytes than this");
DEFINE_int32(comm_ranks, 2, "in-process ranks for --comm");
DEFINE_int64(comm_max_bytes, 16 << 20,
             "largest message for --comm (sizes go from 4 KiB by x4)");
DEFINE_double(interference_seconds, 1.0,
              "seconds the interference measurement computes alone (and about as long beside the allreduces)");

namespace loom {
namespace {

std::string Time(double s) {
  char buf[32];
  if (s < 1e-3) {
    std::snprintf(buf, sizeof(buf), "%.2f us", s * 1e6);
  } else if (s < 1) {
    std::snprintf(buf, sizeof(buf), "%.3f ms", s * 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%.3f s", s);
  }
  return buf;
}

std::string Rate(double bytes_per_second) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g GB/s", bytes_per_second / 1e9);
  return buf;
}

std::string Today() {
  char buf[16];
  const std::time_t now = std::time(nullptr);
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", std::localtime(&now));
  return buf;
}

// The share of the last 10 s in which some runnable task waited for a CPU
// (Linux PSI), or -1 where the kernel does not report it. Read before
// measuring (the measurement's own threads raise it): on a shared host a
// busy neighbour slows every measurement, so the value is reported.
double CpuPressure() {
  std::FILE* f = std::fopen("/proc/pressure/cpu", "r");
  if (f == nullptr) return -1;
  double avg10 = -1;
  if (std::fscanf(f, "some avg10=%lf", &avg10) != 1) avg10 = -1;
  std::fclose(f);
  return avg10;
}

std::string PressureNote(double pressure) {
  if (pressure < 0) return "";
  return StrCat("CPU pressure ", static_cast<int>(std::lround(pressure)),
                "% before measuring",
                pressure >= 5 ? " (other processes were running: expect slower, "
                                "noisier values)"
                              : "");
}

Status CheckCpu(const proto::Cluster& cluster) {
  if (cluster.device().kind() == proto::Device::CPU) return Status::OK();
  return InvalidArgument("--cluster ", cluster.name(),
                         " describes GPUs, but loom profile measures this "
                         "host's CPU (use a CPU cluster such as local)");
}

// Flags that make profile plan a layout, as loom plan does.
constexpr const char* kLayoutFlags[] = {"config", "dp", "mp", "pp", "micro_batches",
                                        "schedule", "vpp", "dp_bucketing"};

// The programs whose ops are timed: the serial training program, a program
// file, or every job program of a plan (what `loom run` runs for that
// layout: micro-batch slices, tensor-parallel shards, accumulation). Each
// rank's step, op by op in job order, is kept for the summary line; ranks
// sharing a program set appear once.
struct ProfileTarget {
  std::string what;
  Program program;  // the serial program or the file's, when not a plan
  Plan plan;
  std::vector<const Block*> blocks;
  std::vector<std::pair<std::string, std::vector<const Op*>>> steps;
};

StatusOr<Program> SerialProgram(std::string* what) {
  if (!FLAGS_program.empty()) {
    *what = FLAGS_program;
    return LoadProgram(FLAGS_program);
  }
  LOOM_ASSIGN_OR_RETURN(GptConfig config, GptConfigFromFlags());
  LOOM_ASSIGN_OR_RETURN(OptimizerConfig opt, OptimizerConfigFromFlags());
  LOOM_ASSIGN_OR_RETURN(TrainingProgram tp, BuildGptTrainingProgram(config, opt));
  *what = StrCat(config.name, " (", config.num_layers,
                 config.num_layers == 1 ? " layer)" : " layers)");
  return std::move(tp.main);
}

StatusOr<Plan> PlanToProfile(std::string* what) {
  if (!FLAGS_plan.empty()) {
    LOOM_ASSIGN_OR_RETURN(Plan plan, LoadPlan(FLAGS_plan));
    *what = StrCat("plan ", FLAGS_plan);
    return plan;
  }
  LOOM_ASSIGN_OR_RETURN(proto::Strategy strategy, StrategyFromFlags());
  LOOM_ASSIGN_OR_RETURN(GptConfig config, GptConfigFromFlags());
  LOOM_ASSIGN_OR_RETURN(OptimizerConfig opt, OptimizerConfigFromFlags());
  LOOM_ASSIGN_OR_RETURN(Plan plan, PlanGpt(config, opt, strategy));
  *what = StrCat(config.name, " (", config.num_layers,
                 config.num_layers == 1 ? " layer" : " layers", ") at dp=", plan.layout.dp,
                 " mp=", plan.layout.mp, " pp=", plan.layout.pp, ", ",
                 plan.resolved.schedule_mode(), " over ", plan.resolved.micro_batches(),
                 " micro-batches");
  return plan;
}

StatusOr<std::unique_ptr<ProfileTarget>> TargetFromFlags() {
  bool layout = !FLAGS_plan.empty();
  for (const char* flag : kLayoutFlags) layout |= FlagGiven(flag);
  if (layout && !FLAGS_program.empty()) {
    return InvalidArgument("--program times one program; --plan and the layout flags "
                           "(--dp, --mp, --pp, ...) plan a preset instead");
  }
  auto t = std::make_unique<ProfileTarget>();
  if (!layout) {
    LOOM_ASSIGN_OR_RETURN(t->program, SerialProgram(&t->what));
    t->blocks.push_back(&t->program.global_block());
    std::vector<const Op*> ops;
    for (const Op* op : t->program.global_block().ops()) ops.push_back(op);
    t->steps.emplace_back("the program's", std::move(ops));
    return t;
  }
  LOOM_ASSIGN_OR_RETURN(t->plan, PlanToProfile(&t->what));
  std::set<const void*> seen;
  for (const RankPlan& rank : t->plan.ranks) {
    if (!seen.insert(rank.programs_key()).second) continue;
    for (const auto& [key, program] : rank.programs()) {
      t->blocks.push_back(&program.global_block());
    }
    std::vector<const Op*> ops;
    for (const Job& job : rank.jobs) {
      const Program* program = rank.ProgramFor(job);
      if (program == nullptr) continue;
      for (const Op* op : program->global_block().ops()) ops.push_back(op);
    }
    t->steps.emplace_back(StrCat("rank ", rank.rank, "'s (", CoordsToString(rank.coords), ")"),
                          std::move(ops));
  }
  return t;
}

Status ProfileOps() {
  LOOM_ASSIGN_OR_RETURN(proto::Cluster cluster, ClusterFromFlags());
  LOOM_RETURN_IF_ERROR(CheckCpu(cluster));
  const std::string path = CostTablePathFromFlags();
  // Read first, so that a malformed table fails before minutes of timing.
  LOOM_RETURN_IF_ERROR(CostTable::LoadOrEmpty(path).status());
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<ProfileTarget> target, TargetFromFlags());

  OpProfileOptions options;
  options.warmup_runs = FLAGS_profile_warmup;
  options.samples = FLAGS_profile_samples;
  options.min_sample_seconds = FLAGS_profile_min_sample_ms * 1e-3;
  options.max_bytes = FLAGS_profile_max_bytes;
  options.seed = static_cast<uint64_t>(FLAGS_seed);
  if (options.samples < 1) return InvalidArgument("--profile_samples must be at least 1");
  const double pressure_before = CpuPressure();
  const auto start = std::chrono::steady_clock::now();
  LOOM_ASSIGN_OR_RETURN(
      BlockProfile profile,
      ProfileBlocks(target->blocks, options,
                    [](int i, int total, const std::string& signature) {
                      std::fprintf(stderr, "[%d/%d] %s ...\n", i, total,
                                   signature.c_str());
                    }));
  const double seconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start).count();
  for (const SkippedOp& s : profile.skipped) {
    std::fprintf(stderr, "skipped %s: %s\n", s.signature.c_str(), s.reason.c_str());
  }

  std::vector<proto::CostEntry> entries;
  for (const OpTiming& t : profile.timed) {
    proto::CostEntry e;
    e.set_signature(t.signature);
    e.set_op_type(t.type);
    e.set_flops(t.work.flops);
    e.set_bytes(t.work.bytes);
    e.set_median_seconds(t.median_seconds);
    e.set_samples(t.samples);
    e.set_runs_per_sample(t.runs_per_sample);
    e.set_device(TableDevice(cluster));
    entries.push_back(std::move(e));
  }
  // Re-read: another profile may have written the file meanwhile.
  LOOM_ASSIGN_OR_RETURN(CostTable table, CostTable::LoadOrEmpty(path));
  const CostTable::MergeCounts counts = table.Merge(entries);
  LOOM_RETURN_IF_ERROR(table.Save(path));
  std::printf("profiled %zu signatures of %s on '%s' in %.1f s (%zu skipped): "
              "%d added, %d replaced\nwrote %s (%d entries)\n",
              profile.timed.size(), target->what.c_str(), TableDevice(cluster).c_str(), seconds,
              profile.skipped.size(), counts.added, counts.replaced, path.c_str(),
              table.size());
  // Each step run op after op at the table's medians: for the serial
  // program comparable with loom train's time_ms when nothing was skipped.
  for (const auto& [who, ops] : target->steps) {
    double serial = 0;
    int priced = 0;
    for (const Op* op : ops) {
      if (const proto::CostEntry* e = table.Find(OpSignature(*op), TableDevice(cluster))) {
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

// Fits α and β over `samples` and prints the fit and its residuals.
StatusOr<CommFit> PrintFit(const std::string& title,
                           const std::vector<CommSample>& samples,
                           bool half_duplex, bool rows) {
  auto fit = FitAlphaBeta(samples, half_duplex);
  if (!fit.ok()) return fit.status().WithContext(title);
  std::printf("%s: alpha %s, beta %s, rms residual %.1f%%%s\n", title.c_str(),
              Time(fit->latency_seconds).c_str(), Rate(fit->bandwidth).c_str(),
              100 * fit->rms_relative_residual,
              fit->latency_clamped ? " (alpha pinned to 0)" : "");
  if (!rows) return fit;
  for (size_t i = 0; i < samples.size(); ++i) {
    std::printf("  %-34s measured %11s  model %11s  residual %+6.1f%%\n",
                samples[i].label.c_str(), Time(samples[i].seconds).c_str(),
                Time(fit->predicted[i]).c_str(), 100 * fit->relative_residual[i]);
  }
  return fit;
}

Status MeasureComm(proto::Cluster* cluster) {
  CommProfileOptions options;
  options.ranks = FLAGS_comm_ranks;
  options.sizes.clear();
  for (int64_t b = 4 << 10; b <= FLAGS_comm_max_bytes; b *= 4) options.sizes.push_back(b);
  if (options.sizes.empty()) return InvalidArgument("--comm_max_bytes must be at least 4096");
  LOOM_ASSIGN_OR_RETURN(
      std::vector<CommTiming> timings,
      ProfileComm(options, [](const std::string& what) {
        std::fprintf(stderr, "timing %s ...\n", what.c_str());
      }));
  // Loom's Gloo communicator runs the direct algorithm: fit its terms.
  std::vector<CommSample> all;
  std::map<std::string, std::vector<CommSample>> by_op;
  for (const CommTiming& t : timings) {
    LOOM_ASSIGN_OR_RETURN(CollectiveKind kind, CollectiveKindOf(t.op));
    CommSample s{StrCat(t.op, " n=", t.ranks, " ", t.bytes, " B"),
                 TermsOf(kind, CommAlgorithm::kDirect, t.ranks),
                 static_cast<double>(t.bytes), t.median_seconds};
    all.push_back(s);
    by_op[t.op].push_back(s);
  }
  // Each collective's own fit shows how well one link describes them all;
  // it is for reading only, so a failure is printed, not fatal.
  for (const auto& [op, samples] : by_op) {
    auto fit = PrintFit(op + " alone", samples, false, false);
    if (!fit.ok()) std::printf("%s\n", fit.status().message().c_str());
  }
  // Full or half duplex: the data decide, by the smaller residual.
  LOOM_ASSIGN_OR_RETURN(CommFit full,
                        PrintFit("joint fit, full duplex", all, false, false));
  LOOM_ASSIGN_OR_RETURN(CommFit half,
                        PrintFit("joint fit, half duplex", all, true, false));
  const bool half_duplex = half.rms_relative_residual < full.rms_relative_residual;
  LOOM_ASSIGN_OR_RETURN(
      CommFit fit,
      PrintFit(StrCat("kept: ", half_duplex ? "half" : "full",
                      " duplex (direct algorithm)"),
               all, half_duplex, true));
  proto::Link* link = cluster->mutable_intra_node();
  link->set_bandwidth(fit.bandwidth);
  link->set_latency_seconds(fit.latency_seconds);
  link->set_half_duplex(half_duplex);
  link->set_measured(true);
  char source[160];
  std::snprintf(source, sizeof(source),
                "loom profile --comm, %s: Gloo on loopback, %d ranks, %zu "
                "samples, rms residual %.1f%%",
                Today().c_str(), options.ranks, all.size(),
                100 * fit.rms_relative_residual);
  link->set_source(source);

  InterferenceOptions io;
  io.ranks = FLAGS_comm_ranks;
  io.seconds = FLAGS_interference_seconds;
  io.allreduce_bytes = std::min<int64_t>(FLAGS_comm_max_bytes, 4 << 20);
  std::fprintf(stderr, "timing %lldx%lld matmul loops alone and beside an "
               "allreduce loop ...\n", static_cast<long long>(io.matmul_dim),
               static_cast<long long>(io.matmul_dim));
  LOOM_ASSIGN_OR_RETURN(InterferenceResult r, MeasureInterference(io));
  std::printf("interference: matmul on %d threads %s alone, %s beside %lld "
              "allreduces of %lld B on %d ranks: slowdown %.2f (median of %d "
              "cycles)%s\n",
              r.compute_threads, Time(r.alone_seconds).c_str(),
              Time(r.with_comm_seconds).c_str(),
              static_cast<long long>(r.allreduces),
              static_cast<long long>(io.allreduce_bytes), io.ranks, r.slowdown,
              io.cycles,
              r.slowdown < 1 ? " (below 1 is noise; recorded as 1)" : "");
  std::printf("  (the other way: one allreduce %s alone, %s beside the matmuls)\n",
              Time(r.allreduce_alone_seconds).c_str(),
              Time(r.allreduce_with_compute_seconds).c_str());
  cluster->set_comm_compute_slowdown(std::max(1.0, r.slowdown));
  return Status::OK();
}

Status CalibrateInto(proto::Cluster* cluster) {
  std::fprintf(stderr, "timing sgemm 1024^3, a 256 MiB copy and a one-element op ...\n");
  LOOM_ASSIGN_OR_RETURN(DeviceCalibration c, CalibrateDevice());
  std::printf("device: %d cores; one core: sgemm %.3g GFLOP/s, copy %s; "
              "per-op overhead %s; memory %.1f GiB\n",
              c.cores, c.core_fp32_flops / 1e9, Rate(c.core_memory_bandwidth).c_str(),
              Time(c.dispatch_seconds).c_str(), c.memory_bytes / double(1 << 30));
  proto::Device* d = cluster->mutable_device();
  d->set_cores(c.cores);
  // The device's rates are one core's times the cores: a stream (one
  // thread) then gets back exactly what one core measured.
  d->set_peak_fp32_flops(c.core_fp32_flops * c.cores);
  d->set_memory_bandwidth(c.core_memory_bandwidth * c.cores);
  d->set_memory_bytes(c.memory_bytes);
  d->set_kernel_launch_seconds(c.dispatch_seconds);
  return Status::OK();
}

Status ProfileHost() {
  const double pressure_before = CpuPressure();
  std::string out = FLAGS_cluster_out;
  if (out.empty()) {
    out = (std::filesystem::path(CostTablePathFromFlags()).parent_path() /
           "local.cluster.pbtxt").string();
  }
  // Start from the file being updated, so that --comm and
  // --calibrate_device run apart keep each other's values.
  proto::Cluster cluster;
  if (std::filesystem::exists(out)) {
    LOOM_ASSIGN_OR_RETURN(cluster, LoadCluster(out));
  } else {
    LOOM_ASSIGN_OR_RETURN(cluster, ClusterFromFlags());
  }
  LOOM_RETURN_IF_ERROR(CheckCpu(cluster));
  if (FLAGS_calibrate_device) LOOM_RETURN_IF_ERROR(CalibrateInto(&cluster));
  if (FLAGS_comm) LOOM_RETURN_IF_ERROR(MeasureComm(&cluster));
  const std::string note = PressureNote(pressure_before);
  if (!note.empty()) {
    std::printf("%s\n", note.c_str());
    if (FLAGS_comm) {
      cluster.mutable_intra_node()->set_source(
          cluster.intra_node().source() + "; " + note);
    }
  }
  LOOM_RETURN_IF_ERROR(ValidateCluster(cluster).WithContext(out));
  LOOM_RETURN_IF_ERROR(SaveCluster(cluster, out));
  std::printf("wrote %s (use it with --cluster %s)\n", out.c_str(), out.c_str());
  return Status::OK();
}

}  // namespace

Status RunProfile(const std::vector<std::string>& args) {
  if (!args.empty()) return InvalidArgument("unexpected argument '", args[0], "'");
  if (FLAGS_comm || FLAGS_calibrate_device) {
    if (!FLAGS_program.empty() || !FLAGS_plan.empty()) {
      return InvalidArgument(FLAGS_program.empty() ? "--plan" : "--program",
                             " times ops; it does not go with --comm or --calibrate_device");
    }
    return ProfileHost();
  }
  return ProfileOps();
}

}  // namespace loom
