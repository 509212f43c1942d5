// loom profile: fills the op cost table from this host's CPU kernels, or
// measures the host itself (links, interference, device rates) into a
// cluster file.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <vector>

#include "cost_model/cluster.h"
#include "cost_model/cost_table.h"
#include "executor/comm/comm_world.h"
#include "executor/comm/gloo_communicator.h"
#include "profiling/comm_fit.h"
#include "profiling/host_profiler.h"
#include "runtime/launch_env.h"
#include "tools/command.h"
#include "tools/common_flags.h"
#include "tools/profile_util.h"

DECLARE_string(program);
DECLARE_string(plan);
DEFINE_bool(comm, false,
            "measure Gloo collectives on loopback, the communication/"
            "compute interference and the CPU a call takes beside compute, and write "
            "them into --cluster_out; under loom launch, the link between the "
            "launched ranks");
DECLARE_bool(comm_shared_only);
DEFINE_bool(calibrate_device, false,
            "measure this CPU's sgemm rate, copy bandwidth and per-op "
            "overhead, and write them into --cluster_out");
DEFINE_double(calibrate_seconds, 10,
              "--calibrate_device: also time one core's sgemm every quarter second for this "
              "long and print how far its rate moves (the host's own noise); 0: skip");
DEFINE_string(cluster_out, "",
              "cluster file --comm and --calibrate_device update (default: "
              "local.cluster.pbtxt beside the cost table)");
DEFINE_int32(comm_ranks, 2, "in-process ranks for --comm");
DEFINE_string(comm_between_ms, "0.1,1",
              "--comm: before each call every rank computes for a random time in this range "
              "(ms, 'MIN,MAX'), as in a training step, and a call's time is the mean from its "
              "last party's arrival; '0': calls back to back with the cores kept awake, the "
              "median");
DEFINE_string(comm_shared_between_ms, "0.01,0.02",
              "--comm on in-process ranks with pinned cores: the calls are timed again with two "
              "groups of ranks on the same cores, calling at once with this compute (ms, "
              "'MIN,MAX') before each call, for the link's shared_cores costs (a call beside "
              "another rank's call on its core, as when a plan pins more ranks than cores); "
              "'0': not measured");
DEFINE_string(comm_idle_ms, "",
              "--comm: also time the calls with the parties arriving together after these mean "
              "gaps of compute (ms, comma-separated, each above --comm_between_ms's; the gap "
              "drawn from half to one and a half times it), and record what each adds over the "
              "fitted gap as the link's after_idle; empty: not measured");
DEFINE_int32(comm_rounds, 101, "--comm with compute between calls: timed rounds of every call");
DEFINE_int64(comm_max_bytes, 16 << 20,
             "largest message for --comm (sizes go from 4 KiB by x4)");
DEFINE_int64(comm_long_bytes, 16 << 20,
             "--comm: also time allreduces of this many bytes, and where the fitted link "
             "prices them more than 10% too fast (a shaped link's token bucket), record the "
             "rate they ran at as the link's sustained_bandwidth; 0: skip. Under loom launch "
             "--net_rate, always recorded");
DEFINE_double(interference_seconds, 1.0,
              "seconds the interference measurement computes alone (and about as long each runs the allreduces alone and both together)");

namespace loom {

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

proto::Link* LinkSpannedBy(int ranks, proto::Cluster* cluster) {
  std::vector<int> members(ranks);
  for (int r = 0; r < ranks; ++r) members[r] = r;
  const bool inter = CommModel(*cluster).LevelOf(members) == LinkLevel::kInterNode;
  return inter ? cluster->mutable_inter_node() : cluster->mutable_intra_node();
}

void PrintCommProgress(const std::string& what) {
  std::fprintf(stderr, "timing %s ...\n", what.c_str());
}

std::string Rate(double bytes_per_second) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g GB/s", bytes_per_second / 1e9);
  return buf;
}

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

namespace {

// Under `loom launch` the ranks are processes (on the emulated network
// with --net_rate) and the link measured is the one between them; else
// in-process ranks on loopback. Rank 0 gets the timings, the others none.
StatusOr<std::vector<CommTiming>> TimeCollectives(const CommProfileOptions& options,
                                                  const std::optional<LaunchEnv>& env) {
  if (!env.has_value()) return ProfileComm(options, PrintCommProgress);
  // A fresh job per world (the store refuses a key twice); every rank makes
  // them in the same order.
  static int worlds = 0;
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CommWorld> world,
                        LaunchWorld(*env, StrCat("profile-", worlds++)));
  LOOM_ASSIGN_OR_RETURN(Communicator * all, world->Get(kDpRing));
  return ProfileCommMember(*all, options, PrintCommProgress);
}

// MeasureInterference on in-process ranks, or this process's member of a
// launch (over the launched link).
StatusOr<InterferenceResult> MeasureInterferenceHere(const InterferenceOptions& io,
                                                     const std::optional<LaunchEnv>& env) {
  if (!env.has_value()) return MeasureInterference(io);
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CommWorld> world,
                        LaunchWorld(*env, "profile-interference"));
  LOOM_ASSIGN_OR_RETURN(Communicator * all, world->Get(kDpRing));
  return MeasureInterferenceMember(*all, io);
}

// TimeLongAllReduce on loopback, or TimeLongAllReduceMember as a member of
// a launch.
StatusOr<double> TimeLongAllReduceHere(int64_t bytes, int calls, int ranks,
                                       std::chrono::milliseconds timeout,
                                       const std::optional<LaunchEnv>& env) {
  if (!env.has_value() || env->rank == 0) {
    std::fprintf(stderr, "timing %d allreduces of %lld B ...\n", calls,
                 static_cast<long long>(bytes));
  }
  if (!env.has_value()) return TimeLongAllReduce(ranks, bytes, calls, timeout);
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CommWorld> world,
                        LaunchWorld(*env, "profile-long", timeout));
  LOOM_ASSIGN_OR_RETURN(Communicator * all, world->Get(kDpRing));
  return TimeLongAllReduceMember(*all, bytes, calls);
}

// Where the fitted `link` prices an allreduce of `bytes` among `ranks`
// more than 10% under the `seconds` it took, or the link is `shaped`, the
// link cannot keep its fitted rate over long transfers: records the rate
// the call ran at as its sustained_bandwidth.
void RecordSustainedRate(int64_t bytes, double seconds, const std::vector<int>& ranks,
                         bool shaped, proto::Cluster* cluster, proto::Link* link) {
  const CommModel model(*cluster);
  const double priced =
      model.CommSeconds(CommCall::kAllReduce, CommAlgorithm::kDirect, bytes, ranks);
  const double wire_bytes =
      model.WireBytes(CommCall::kAllReduce, CommAlgorithm::kDirect, bytes, ranks);
  const bool slower = shaped || seconds > 1.1 * priced;
  if (slower) link->set_sustained_bandwidth(wire_bytes / seconds);
  std::printf("long transfers: allreduce of %lld B %s measured, %s priced by the fit%s\n",
              static_cast<long long>(bytes), Time(seconds).c_str(), Time(priced).c_str(),
              slower ? StrCat(": sustained rate ", Rate(wire_bytes / seconds), " recorded").c_str()
                     : "");
}

// --comm_idle_ms in seconds, increasing, each above the mean gap of
// --comm_between_ms (which must have compute between calls).
StatusOr<std::vector<double>> ParseIdleGaps(const CommProfileOptions& options) {
  std::vector<double> gaps;
  if (FLAGS_comm_idle_ms.empty()) return gaps;
  const double fitted =
      0.5 * (options.between_calls_min_seconds + options.between_calls_max_seconds);
  if (fitted <= 0) {
    return InvalidArgument("--comm_idle_ms needs compute between the calls: --comm_between_ms "
                           "must not be '0'");
  }
  for (const std::string& item : CommaList(FLAGS_comm_idle_ms)) {
    char* end = nullptr;
    const double ms = std::strtod(item.c_str(), &end);
    const double last = gaps.empty() ? fitted : gaps.back();
    if (item.empty() || *end != '\0' || !std::isfinite(ms) || ms * 1e-3 <= last || ms > 1000) {
      return InvalidArgument("--comm_idle_ms must list increasing gaps in ms, each above the "
                             "one before and the mean of --comm_between_ms (", fitted * 1e3,
                             " ms), at most 1000; got '", FLAGS_comm_idle_ms, "'");
    }
    gaps.push_back(ms * 1e-3);
  }
  return gaps;
}

// Fits the link the measured ranks span into `cluster`; `*link_out` is
// that link, or null on the ranks of a launch other than 0 (they only take
// part, and write nothing).
Status MeasureComm(proto::Cluster* cluster, proto::Link** link_out) {
  *link_out = nullptr;
  LOOM_ASSIGN_OR_RETURN(std::optional<LaunchEnv> env, LaunchEnvFromEnvironment());
  if (env.has_value() && env->world_size < 2) {
    return FailedPrecondition("--comm under loom launch needs 2 ranks or more");
  }
  CommProfileOptions options;
  options.ranks = env.has_value() ? env->world_size : FLAGS_comm_ranks;
  LOOM_RETURN_IF_ERROR(ParseBetween("comm_between_ms", FLAGS_comm_between_ms,
                                    &options.between_calls_min_seconds,
                                    &options.between_calls_max_seconds));
  double shared_min_seconds = 0, shared_max_seconds = 0;
  LOOM_RETURN_IF_ERROR(ParseBetween("comm_shared_between_ms", FLAGS_comm_shared_between_ms,
                                    &shared_min_seconds, &shared_max_seconds));
  LOOM_ASSIGN_OR_RETURN(std::vector<double> idle_gaps, ParseIdleGaps(options));
  // loom launch --net_rate shapes each rank's egress with a token bucket.
  const bool shaped = env.has_value() && env->net_burst_bytes > 0;
  if (shaped && FLAGS_comm_long_bytes <= 0) {
    return InvalidArgument("--comm_long_bytes must be positive on a shaped link (loom launch "
                           "--net_rate): its long allreduces measure the shaper's rate");
  }
  // Means of calls that wait on the scheduler are noisier than medians of
  // calls back to back: more rounds.
  if (options.between_calls_max_seconds > 0) options.samples = FLAGS_comm_rounds;
  options.sizes.clear();
  for (int64_t b = 4 << 10; b <= FLAGS_comm_max_bytes; b *= 4) options.sizes.push_back(b);
  if (options.sizes.empty()) return InvalidArgument("--comm_max_bytes must be at least 4096");
  // In the step regime, twice: the parties arriving together, and apart.
  options.together = options.between_calls_max_seconds > 0;
  LinkTimings link_timings;
  std::vector<CommTiming>& timings = link_timings.together;
  // On a busy host the times may not grow with the bytes moved, and then
  // determine no bandwidth. In one process, time them again (twice at
  // most); the ranks of a launch cannot agree to without a round trip,
  // and report it.
  for (int attempt = 1;; ++attempt) {
    LOOM_ASSIGN_OR_RETURN(timings, TimeCollectives(options, env));
    if (env.has_value() || attempt == 3 || DeterminesLink(timings)) break;
    std::fprintf(stderr, "the times do not grow with the bytes moved (a busy host?): timing "
                 "again, %d of 3\n", attempt + 1);
  }
  if (options.between_calls_max_seconds > 0) {
    options.together = false;
    LOOM_ASSIGN_OR_RETURN(link_timings.waited, TimeCollectives(options, env));
    // And back to back with the cores kept awake, as a call finds them
    // where they compute or other ranks share them (Link.awake). In one
    // process only: each process of a launch would need its own wakers.
    if (!env.has_value()) {
      CommProfileOptions back_to_back = options;
      back_to_back.between_calls_min_seconds = back_to_back.between_calls_max_seconds = 0;
      back_to_back.samples = CommProfileOptions().samples;
      LOOM_ASSIGN_OR_RETURN(link_timings.awake, TimeCollectives(back_to_back, env));
    }
    // And after longer compute, where measured (Link.after_idle).
    link_timings.together_gap_seconds =
        0.5 * (options.between_calls_min_seconds + options.between_calls_max_seconds);
    for (double gap : idle_gaps) {
      CommProfileOptions after = options;
      after.together = true;
      after.between_calls_min_seconds = 0.5 * gap;
      after.between_calls_max_seconds = 1.5 * gap;
      LOOM_ASSIGN_OR_RETURN(std::vector<CommTiming> calls, TimeCollectives(after, env));
      link_timings.after_idle.emplace_back(gap, std::move(calls));
    }
    // And with two ranks on each core, where a plan pins more ranks than
    // there are cores (Link.shared_cores). The parties of a tensor-parallel
    // all-reduce arrive together.
    if (!env.has_value() && shared_max_seconds > 0 &&
        cluster->device().core_sharing() == proto::Device::PINNED) {
      CommProfileOptions shared = options;
      shared.between_calls_min_seconds = shared_min_seconds;
      shared.between_calls_max_seconds = shared_max_seconds;
      shared.together = true;
      StatusOr<std::vector<CommTiming>> on_shared = TimeOnSharedCores(shared, env);
      if (on_shared.status().code() == StatusCode::kFailedPrecondition) {
        std::printf("shared cores: not measured (%s)\n", on_shared.status().message().c_str());
      } else {
        LOOM_RETURN_IF_ERROR(on_shared.status());
        link_timings.shared_cores = std::move(*on_shared);
      }
    }
  }
  // How communication and computation slow each other on this host: every
  // member of a launch takes part, over the launched link.
  InterferenceOptions io;
  io.ranks = options.ranks;
  io.seconds = FLAGS_interference_seconds;
  io.allreduce_bytes = std::min<int64_t>(FLAGS_comm_max_bytes, 4 << 20);
  if (!env.has_value() || env->rank == 0) {
    std::fprintf(stderr, "timing %lldx%lld matmul loops alone and beside an "
                 "allreduce loop ...\n", static_cast<long long>(io.matmul_dim),
                 static_cast<long long>(io.matmul_dim));
  }
  LOOM_ASSIGN_OR_RETURN(InterferenceResult interference, MeasureInterferenceHere(io, env));
  constexpr int kLongCalls = 3;
  double long_seconds = 0;
  if (FLAGS_comm_long_bytes > 0) {
    LOOM_ASSIGN_OR_RETURN(long_seconds, TimeLongAllReduceHere(FLAGS_comm_long_bytes, kLongCalls,
                                                              options.ranks, io.timeout, env));
  }
  // How long calls wait for cores that compute (all of a launch's ranks
  // take part; its rank 0 records).
  LOOM_RETURN_IF_ERROR(ProfileCoreWait(cluster, env));
  // Last: a launch's member pins its thread for it.
  LOOM_ASSIGN_OR_RETURN(std::vector<CallCpuSample> call_cpu,
                        MeasureCallCpuHere(options.ranks, FLAGS_comm_max_bytes, env));
  if (env.has_value() && env->rank != 0) return Status::OK();
  const std::string regime =
      options.between_calls_max_seconds > 0
          ? StrCat("means after ", options.between_calls_min_seconds * 1e3, "-",
                   options.between_calls_max_seconds * 1e3, " ms of compute")
          : "medians back to back";
  const std::string where =
      !env.has_value() ? "on loopback"
      : env->host.empty() || env->host == "127.0.0.1"
          ? "between processes on loopback"
          : StrCat("between launched ranks on an emulated network, host ", env->host);
  std::vector<int> ranks(options.ranks);
  for (int r = 0; r < options.ranks; ++r) ranks[r] = r;
  proto::Link* link = LinkSpannedBy(options.ranks, cluster);
  // A shaped link is full duplex: each rank's egress is shaped on its own.
  LOOM_RETURN_IF_ERROR(FitLink(link_timings,
                               StrCat("loom profile --comm, ", Today(), ": Gloo ", where, ", ",
                                      options.ranks, " ranks, ", regime,
                                      shaped ? ", links shaped by tc tbf" : ""),
                               shaped ? std::optional<bool>(false) : std::nullopt, link));
  *link_out = link;
  // A p2p step's sends return once handed to the socket (Link.send_buffer_bytes).
  link->set_send_buffer_bytes(GlooSendBufferBytes());
  std::printf("sends: up to %lld B return once in the socket's buffer (Gloo's SO_SNDBUF here)\n",
              static_cast<long long>(link->send_buffer_bytes()));
  const InterferenceResult& r = interference;
  std::printf("interference: matmul on %d threads %s alone, %s beside %lld "
              "allreduces of %lld B on %d ranks: slowdown %.2f (median of %d "
              "cycles)%s\n",
              r.compute_threads, Time(r.alone_seconds).c_str(),
              Time(r.with_comm_seconds).c_str(),
              static_cast<long long>(r.allreduces),
              static_cast<long long>(io.allreduce_bytes), io.ranks, r.slowdown,
              io.cycles,
              r.slowdown < 1 ? " (below 1 is noise; recorded as 1)" : "");
  std::printf("the other way: one allreduce %s alone, %s beside the matmuls: slowdown %.2f "
              "(median of the cycles')\n",
              Time(r.allreduce_alone_seconds).c_str(),
              Time(r.allreduce_with_compute_seconds).c_str(), r.comm_slowdown);
  LOOM_RETURN_IF_ERROR(RecordCallCpu(
      call_cpu, StrCat("loom profile --comm, ", Today(), ": allreduces back to back beside ",
                       "compute ", where, ", ", options.ranks, " ranks, the process CPU clock"),
      link));
  // A new fit: a bound measured against an older one no longer applies.
  link->clear_sustained_bandwidth();
  link->clear_burst_bytes();
  if (FLAGS_comm_long_bytes > 0) {
    RecordSustainedRate(FLAGS_comm_long_bytes, long_seconds, ranks, shaped, cluster, link);
  }
  if (shaped) {
    // The shaper's bucket is not recorded: its credit priced traced
    // all-reduces at 200 Mbit/s but not at 1 Gbit/s, where tails and long
    // calls outweigh it (configs/clusters/emulated.pbtxt), so where it
    // holds is the cluster file's author's to say.
    std::printf("shaped link: its bucket is %lld B (loom launch's; Link.burst_bytes prices its "
                "credit, not recorded here)\n",
                static_cast<long long>(env->net_burst_bytes));
  }
  cluster->set_comm_compute_slowdown(std::max(1.0, r.slowdown));
  cluster->set_compute_comm_slowdown(
      std::max(1.0, r.comm_slowdown));
  return Status::OK();
}

// This host's CPU as /proc/cpuinfo names it ("AMD EPYC"); empty if it
// does not.
std::string HostCpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) return "";
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

Status CalibrateInto(proto::Cluster* cluster) {
  if (FLAGS_calibrate_seconds < 0 || FLAGS_calibrate_seconds > 3600) {
    return InvalidArgument("--calibrate_seconds must be 0 to 3600, got ",
                           FLAGS_calibrate_seconds);
  }
  std::fprintf(stderr, "timing sgemm 1024^3, a 256 MiB copy and a one-element op ...\n");
  LOOM_ASSIGN_OR_RETURN(DeviceCalibration c, CalibrateDevice(FLAGS_calibrate_seconds));
  std::printf("device: %d cores; one core: sgemm %.3g GFLOP/s, copy %s; "
              "per-op overhead %s; memory %.1f GiB\n",
              c.cores, c.core_fp32_flops / 1e9, Rate(c.core_memory_bandwidth).c_str(),
              Time(c.dispatch_seconds).c_str(), c.memory_bytes / double(1 << 30));
  std::vector<double> rates = c.core_fp32_flops_over_time;
  if (!rates.empty()) {
    std::sort(rates.begin(), rates.end());
    const auto at = [&](double q) { return rates[static_cast<size_t>(q * (rates.size() - 1))]; };
    const double median = at(0.5);
    std::printf("host noise: one core's sgemm over %.0f s (%zu samples): median %.3g GFLOP/s, "
                "10th-90th percentile %.3g-%.3g (%+.0f%% to %+.0f%%), range %.3g-%.3g\n",
                FLAGS_calibrate_seconds, rates.size(), median / 1e9, at(0.1) / 1e9,
                at(0.9) / 1e9, 100 * (at(0.1) / median - 1), 100 * (at(0.9) / median - 1),
                rates.front() / 1e9, rates.back() / 1e9);
  }
  proto::Device* d = cluster->mutable_device();
  // The host measured, not the one the starting file describes.
  const std::string cpu = HostCpuModel();
  if (cpu.empty()) {
    d->clear_model();
  } else {
    d->set_model(StrCat(cpu, ", ", c.cores, " cores"));
  }
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
  if (FLAGS_comm_shared_only && !std::filesystem::exists(out)) {
    return FailedPrecondition("--comm_shared_only adds to the link of an existing cluster file, "
                              "and ", out, " does not exist (run loom profile --comm with the "
                              "same --cluster_out first)");
  }
  proto::Cluster cluster;
  if (std::filesystem::exists(out)) {
    LOOM_ASSIGN_OR_RETURN(cluster, LoadCluster(out));
  } else {
    LOOM_ASSIGN_OR_RETURN(cluster, ClusterFromFlags());
    // Until --calibrate_device measures this host, its device figures are
    // the preset's, from the host the preset names.
    if (!FLAGS_calibrate_device && cluster.device().has_model()) {
      cluster.mutable_device()->set_model(StrCat(cluster.device().model(), " (the ", FLAGS_cluster,
                                                 " preset's figures, not this host's)"));
    }
  }
  LOOM_RETURN_IF_ERROR(CheckCpu(cluster));
  if (FLAGS_calibrate_device) LOOM_RETURN_IF_ERROR(CalibrateInto(&cluster));
  proto::Link* link = nullptr;
  if (FLAGS_comm || FLAGS_comm_shared_only) {
    LOOM_RETURN_IF_ERROR(FLAGS_comm ? MeasureComm(&cluster, &link)
                                    : ProfileSharedCores(&cluster, &link));
    if (link == nullptr) return Status::OK();  // a launch's rank other than 0
  }
  const std::string note = PressureNote(pressure_before);
  if (!note.empty()) {
    std::printf("%s\n", note.c_str());
    if (link != nullptr) link->set_source(link->source() + "; " + note);
  }
  LOOM_RETURN_IF_ERROR(ValidateCluster(cluster).WithContext(out));
  LOOM_RETURN_IF_ERROR(SaveCluster(cluster, out));
  std::printf("wrote %s (use it with --cluster %s)\n", out.c_str(), out.c_str());
  return Status::OK();
}

}  // namespace

Status ParseBetween(const std::string& name, const std::string& flag, double* min_seconds,
                    double* max_seconds) {
  double lo = 0, hi = 0;
  char rest = 0;
  if (flag != "0" && (std::sscanf(flag.c_str(), "%lf,%lf%c", &lo, &hi, &rest) != 2 || lo < 0 ||
                      hi < lo || hi <= 0)) {
    return InvalidArgument("--", name, " must be 'MIN,MAX' with 0 <= MIN <= MAX and MAX > 0, "
                           "or '0'; got '", flag, "'");
  }
  *min_seconds = lo * 1e-3;
  *max_seconds = hi * 1e-3;
  return Status::OK();
}

proto::CostEntry CostEntryOf(const OpTiming& timing, const std::string& device,
                             const char* context) {
  proto::CostEntry e;
  e.set_signature(timing.signature);
  e.set_op_type(timing.type);
  e.set_flops(timing.work.flops);
  e.set_bytes(timing.work.bytes);
  e.set_median_seconds(timing.median_seconds);
  e.set_samples(timing.samples);
  e.set_runs_per_sample(timing.runs_per_sample);
  e.set_device(device);
  e.set_context(context);
  return e;
}

StatusOr<CostTable> MergeIntoCostTable(const std::string& path,
                                       const std::vector<proto::CostEntry>& entries,
                                       CostTable::MergeCounts* counts) {
  LOOM_ASSIGN_OR_RETURN(CostTable table, CostTable::LoadOrEmpty(path));
  *counts = table.Merge(entries);
  LOOM_RETURN_IF_ERROR(table.Save(path));
  return table;
}

std::string Today() {
  char buf[16];
  const std::time_t now = std::time(nullptr);
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", std::localtime(&now));
  return buf;
}

Status RunProfile(const std::vector<std::string>& args) {
  if (!args.empty()) return InvalidArgument("unexpected argument '", args[0], "'");
  LOOM_ASSIGN_OR_RETURN(DeviceType device, DeviceFromFlags());
  if (FLAGS_comm && FLAGS_comm_shared_only) {
    return InvalidArgument("--comm_shared_only measures one regime of a link --comm already "
                           "measured; give one or the other");
  }
  if (FLAGS_comm || FLAGS_comm_shared_only || FLAGS_calibrate_device) {
    if (device != DeviceType::kCpu) {
      return Unimplemented("--device ", FLAGS_device, " with --comm or --calibrate_device: "
                           "they measure this host's CPU and Gloo; NCCL is not timed yet");
    }
    if (!FLAGS_program.empty() || !FLAGS_plan.empty()) {
      return InvalidArgument(FLAGS_program.empty() ? "--plan" : "--program",
                             " times ops; it does not go with --comm or --calibrate_device");
    }
    return ProfileHost();
  }
  return ProfileOps();
}

}  // namespace loom
