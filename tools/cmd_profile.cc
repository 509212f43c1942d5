// loom profile: fills the op cost table from this host's CPU kernels, or
// measures the host itself (links, interference, device rates) into a
// cluster file.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "cost_model/cluster.h"
#include "cost_model/cost_table.h"
#include "profiling/cache_profile.h"
#include "profiling/host_profiler.h"
#include "profiling/link_profile.h"
#include "profiling/shared_cores_profile.h"
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
              "local.cluster.pbtxt beside the cost table); when timing a plan's ops, --cluster "
              "is written here with how much longer that plan's ranks pinned two to a core "
              "take to meet (SharedHost.shared_core_lockstep; default: not written)");
namespace loom {

Status CheckCpu(const proto::Cluster& cluster, const char* command) {
  if (cluster.device().kind() == proto::Device::CPU) return Status::OK();
  return InvalidArgument("--cluster ", cluster.name(), " describes GPUs, but ", command,
                         " this host's CPU (use a CPU cluster such as local)");
}

namespace {

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
  // Where the host does not say (a container without sysfs), the cluster
  // keeps what it had.
  auto cache = CalibrateCache();
  if (!cache.ok()) {
    std::printf("cache: not measured (%s)\n", cache.status().message().c_str());
    return Status::OK();
  }
  std::printf(
      "cache: %.1f MiB; one core streams %s from it, %s from memory; a matmul "
      "takes %.3g ns longer a byte of operands read past it\n",
      cache->cache_bytes / double(1 << 20), Rate(cache->cached_read_rate).c_str(),
      Rate(cache->memory_read_rate).c_str(), cache->uncached_read_seconds_per_byte * 1e9);
  d->set_cache_bytes(cache->cache_bytes);
  d->set_uncached_read_seconds_per_byte(cache->uncached_read_seconds_per_byte);
  return Status::OK();
}

Status ProfileHost() {
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
  LOOM_RETURN_IF_ERROR(CheckCpu(cluster, "loom profile measures"));
  LOOM_ASSIGN_OR_RETURN(const double pressure_before, WaitForQuietCpuFromFlags());
  if (FLAGS_calibrate_device) LOOM_RETURN_IF_ERROR(CalibrateInto(&cluster));
  std::vector<proto::Link*> links;
  if (FLAGS_comm) {
    LOOM_ASSIGN_OR_RETURN(const LinkProfileOptions options, LinkProfileOptionsFromFlags());
    LOOM_RETURN_IF_ERROR(MeasureComm(options, &cluster, &links));
    if (links.empty()) return Status::OK();  // a launch's rank other than 0
  } else if (FLAGS_comm_shared_only) {
    LOOM_ASSIGN_OR_RETURN(const LinkProfileOptions options, LinkProfileOptionsFromFlags());
    proto::Link* link = nullptr;
    LOOM_RETURN_IF_ERROR(ProfileSharedCores(options, &cluster, &link));
    if (link == nullptr) return Status::OK();
    links.push_back(link);
  }
  const std::string note = PressureNote(pressure_before);
  if (!note.empty()) {
    std::printf("%s\n", note.c_str());
    for (proto::Link* link : links) link->set_source(link->source() + "; " + note);
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
  if (timing.cold_input_bytes >= 0) e.set_cold_input_bytes(timing.cold_input_bytes);
  return e;
}

std::vector<proto::CostEntry> CostEntriesOf(const PlanOpProfile& profile, const std::string& device,
                                            const std::set<std::string>* only) {
  std::vector<proto::CostEntry> entries;
  const auto add = [&](const std::vector<OpTiming>& timings, const char* context) {
    for (const OpTiming& t : timings) {
      if (only == nullptr || only->count(t.signature)) {
        entries.push_back(CostEntryOf(t, device, context));
      }
    }
  };
  if (profile.in_step) add(profile.in_step->timings, "step");
  add(profile.alone.timed, "alone");
  return entries;
}

StatusOr<CostTable> MergeIntoCostTable(const std::string& path,
                                       const std::vector<proto::CostEntry>& entries,
                                       CostTable::MergeCounts* counts) {
  LOOM_ASSIGN_OR_RETURN(CostTable table, CostTable::LoadOrEmpty(path));
  *counts = table.Merge(entries);
  LOOM_RETURN_IF_ERROR(table.Save(path));
  return table;
}

void ReportLockstep(std::optional<double> lockstep, std::optional<double> shared_core_lockstep,
                    int copies, FILE* report) {
  if (lockstep) {
    PrintTo(report,
            "lockstep: ranks meeting after each stretch of compute on %d cores would take "
            "%.1f%% longer than the mean (the slowest core's stretches)\n",
            copies, (*lockstep - 1) * 100);
  }
  if (shared_core_lockstep) {
    PrintTo(report,
            "lockstep on shared cores: with two ranks on each core, %.1f%% longer than the "
            "mean\n",
            (*shared_core_lockstep - 1) * 100);
  }
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
