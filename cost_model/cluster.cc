#include "cost_model/cluster.h"

#include <algorithm>
#include <cmath>

#include "cost_model/cluster_presets.h"
#include "framework/file_util.h"

namespace loom {
namespace {

bool IsPath(const std::string& s) {
  return s.find('/') != std::string::npos ||
         (s.size() > 6 && s.compare(s.size() - 6, 6, ".pbtxt") == 0);
}

// Bounds far beyond any device or link, so that a value only a typo or a
// corrupt file gives (1e300 s, 65536 x 65536 ranks a node) is refused
// rather than priced.
constexpr double kMaxSeconds = 1;            // a call's latency, a kernel's launch
constexpr double kMaxBytesPerSecond = 1e15;  // any link's or memory's bandwidth
constexpr double kMaxFlops = 1e18;           // one device's peak
constexpr int64_t kMaxMemoryBytes = int64_t{1} << 50;
constexpr int64_t kMaxRanksPerNode = int64_t{1} << 20;

Status Positive(const std::string& field, double v, double max) {
  if (std::isfinite(v) && v > 0 && v <= max) return Status::OK();
  if (std::isfinite(v) && v > max)
    return InvalidArgument(field, " must be at most ", max, ", got ", v);
  return InvalidArgument(field, " must be positive, got ", v);
}

// A latency: 0 (an idealization) to kMaxSeconds.
Status Latency(const std::string& field, double v) {
  if (std::isfinite(v) && v >= 0 && v <= kMaxSeconds) return Status::OK();
  return InvalidArgument(field, " must be 0 to ", kMaxSeconds, " s, got ", v);
}

Status CheckCollectives(const std::string& field,
                        const google::protobuf::RepeatedPtrField<proto::CollectiveCost>& all);
Status CheckWaited(const std::string& field, const proto::WaitedCosts& w);

// Points in increasing idle time, each extra from 0 to a second.
Status CheckAfterIdle(const std::string& field, const proto::Link& link) {
  double last = -1;
  for (int i = 0; i < link.after_idle_size(); ++i) {
    const proto::IdleCost& p = link.after_idle(i);
    const std::string at = StrCat(field, ".after_idle[", i, "]");
    if (!std::isfinite(p.idle_seconds()) || p.idle_seconds() < 0 || p.idle_seconds() > 60) {
      return InvalidArgument(at, ".idle_seconds must be 0 to 60, got ", p.idle_seconds());
    }
    if (p.idle_seconds() <= last) {
      return InvalidArgument(at, ".idle_seconds must be above the point before's (", last,
                             "), got ", p.idle_seconds());
    }
    if (!std::isfinite(p.extra_seconds()) || p.extra_seconds() < 0 || p.extra_seconds() > 1) {
      return InvalidArgument(at, ".extra_seconds must be 0 to 1, got ", p.extra_seconds());
    }
    last = p.idle_seconds();
  }
  return Status::OK();
}

Status CheckLink(const std::string& field, const proto::Link& link) {
  LOOM_RETURN_IF_ERROR(CheckAfterIdle(field, link));
  if (!link.has_bandwidth()) return InvalidArgument(field, ".bandwidth is missing");
  LOOM_RETURN_IF_ERROR(Positive(field + ".bandwidth", link.bandwidth(), kMaxBytesPerSecond));
  if (link.has_sustained_bandwidth()) {
    LOOM_RETURN_IF_ERROR(
        Positive(field + ".sustained_bandwidth", link.sustained_bandwidth(), kMaxBytesPerSecond));
  }
  if (link.has_burst_bytes()) {
    if (link.burst_bytes() < 0) {
      return InvalidArgument(field, ".burst_bytes must not be negative, got ", link.burst_bytes());
    }
    if (!link.has_sustained_bandwidth()) {
      return InvalidArgument(field, ".burst_bytes needs ", field,
                             ".sustained_bandwidth: the rate its bucket refills at");
    }
  }
  if (link.send_buffer_bytes() < 0) {
    return InvalidArgument(field, ".send_buffer_bytes must not be negative, got ",
                           link.send_buffer_bytes());
  }
  if (!link.has_latency_seconds()) {
    return InvalidArgument(field, ".latency_seconds is missing");
  }
  LOOM_RETURN_IF_ERROR(Latency(field + ".latency_seconds", link.latency_seconds()));
  return CheckCollectives(field, link.collective());
}

// `field`: "shared_host.intra_node", the link's costs on shared cores.
Status CheckHostLink(const std::string& field, const proto::HostLinkCosts& link) {
  if (link.has_after_wait()) {
    LOOM_RETURN_IF_ERROR(CheckWaited(field + ".after_wait", link.after_wait()));
  }
  if (link.has_awake()) LOOM_RETURN_IF_ERROR(CheckWaited(field + ".awake", link.awake()));
  if (link.has_shared_cores()) {
    LOOM_RETURN_IF_ERROR(CheckWaited(field + ".shared_cores", link.shared_cores()));
  }
  if (link.has_call_cpu()) {
    const proto::CallCpu& c = link.call_cpu();
    // A call's own CPU: up to a second of it, and bytes it copies at some rate.
    if (!std::isfinite(c.seconds_per_call()) || c.seconds_per_call() < 0 ||
        c.seconds_per_call() > 1) {
      return InvalidArgument(field, ".call_cpu.seconds_per_call must be 0 to 1, got ",
                             c.seconds_per_call());
    }
    if (!c.has_bytes_per_second()) {
      return InvalidArgument(field, ".call_cpu.bytes_per_second is missing");
    }
    LOOM_RETURN_IF_ERROR(
        Positive(field + ".call_cpu.bytes_per_second", c.bytes_per_second(), kMaxBytesPerSecond));
  }
  return Status::OK();
}

Status CheckWaited(const std::string& field, const proto::WaitedCosts& w) {
  LOOM_RETURN_IF_ERROR(Positive(field + ".bandwidth", w.bandwidth(), kMaxBytesPerSecond));
  LOOM_RETURN_IF_ERROR(Latency(field + ".latency_seconds", w.latency_seconds()));
  return CheckCollectives(field, w.collective());
}

Status CheckCollectives(const std::string& field,
                        const google::protobuf::RepeatedPtrField<proto::CollectiveCost>& all) {
  for (int i = 0; i < all.size(); ++i) {
    const proto::CollectiveCost& c = all.Get(i);
    const std::string f = StrCat(field, ".collective[", i, "]");
    static const char* const kKinds[] = {"allreduce", "allgather", "reduce_scatter", "broadcast",
                                         "send"};
    if (std::find(std::begin(kKinds), std::end(kKinds), c.kind()) == std::end(kKinds)) {
      return InvalidArgument(f, ".kind '", c.kind(),
                             "' is not allreduce, allgather, reduce_scatter, broadcast or send");
    }
    LOOM_RETURN_IF_ERROR(Positive(f + ".bandwidth", c.bandwidth(), kMaxBytesPerSecond));
    LOOM_RETURN_IF_ERROR(Latency(f + ".latency_seconds", c.latency_seconds()));
  }
  return Status::OK();
}

Status CheckDevice(const proto::Device& d) {
  LOOM_RETURN_IF_ERROR(Positive("device.peak_fp32_flops", d.peak_fp32_flops(), kMaxFlops));
  if (!(d.flops_efficiency() > 0 && d.flops_efficiency() <= 1)) {
    return InvalidArgument("device.flops_efficiency must be in (0, 1], got ",
                           d.flops_efficiency());
  }
  if (d.has_peak_bf16_flops()) {
    LOOM_RETURN_IF_ERROR(Positive("device.peak_bf16_flops", d.peak_bf16_flops(), kMaxFlops));
  }
  if (d.has_peak_fp16_flops()) {
    LOOM_RETURN_IF_ERROR(Positive("device.peak_fp16_flops", d.peak_fp16_flops(), kMaxFlops));
  }
  LOOM_RETURN_IF_ERROR(
      Positive("device.memory_bandwidth", d.memory_bandwidth(), kMaxBytesPerSecond));
  LOOM_RETURN_IF_ERROR(
      Positive("device.memory_bytes", static_cast<double>(d.memory_bytes()), kMaxMemoryBytes));
  if (!d.has_kernel_launch_seconds()) {
    return InvalidArgument("device.kernel_launch_seconds is missing");
  }
  LOOM_RETURN_IF_ERROR(Latency("device.kernel_launch_seconds", d.kernel_launch_seconds()));
  if (d.kind() == proto::Device::CPU) {
    if (d.cores() < 1) {
      return InvalidArgument("device.cores must be at least 1 for a CPU, got ",
                             d.cores());
    }
  } else if (d.has_cores()) {
    return InvalidArgument("device.cores is for CPUs; this device is a GPU");
  }
  if (d.has_cache_bytes()) {
    LOOM_RETURN_IF_ERROR(
        Positive("device.cache_bytes", static_cast<double>(d.cache_bytes()), kMaxMemoryBytes));
  }
  if (d.has_uncached_read_seconds_per_byte()) {
    LOOM_RETURN_IF_ERROR(
        Latency("device.uncached_read_seconds_per_byte", d.uncached_read_seconds_per_byte()));
  }
  if (d.has_cache_bytes() != d.has_uncached_read_seconds_per_byte()) {
    return InvalidArgument(
        "device.cache_bytes and device.uncached_read_seconds_per_byte go "
        "together; the cluster has only ",
        d.has_cache_bytes() ? "cache_bytes" : "uncached_read_seconds_per_byte");
  }
  const int tiling = d.has_multiprocessors() + d.has_gemm_tile_rows() + d.has_gemm_tile_cols();
  if (tiling != 0 && tiling != 3) {
    return InvalidArgument(
        "device.multiprocessors, gemm_tile_rows and gemm_tile_cols go together; the cluster has ",
        tiling, " of them");
  }
  if (tiling == 3) {
    if (d.kind() != proto::Device::GPU) {
      return InvalidArgument("device.multiprocessors and the GEMM tile are for GPUs");
    }
    for (const auto& [field, value] : {std::pair{"multiprocessors", d.multiprocessors()},
                                       {"gemm_tile_rows", d.gemm_tile_rows()},
                                       {"gemm_tile_cols", d.gemm_tile_cols()}}) {
      if (value < 1 || value > 65536) {
        return InvalidArgument("device.", field, " must be 1..65536, got ", value);
      }
    }
  }
  return Status::OK();
}

Status CheckCoreWait(const proto::SharedHost& h) {
  if (h.core_sharing() != proto::SharedHost::PINNED) {
    return InvalidArgument(
        "shared_host.core_wait is for ranks that keep to their cores "
        "(shared_host.core_sharing PINNED)");
  }
  const proto::CoreWait& w = h.core_wait();
  if (!std::isfinite(w.waits()) || w.waits() < 0 || w.waits() > 100) {
    return InvalidArgument("shared_host.core_wait.waits must be 0 to 100, got ", w.waits());
  }
  if (!std::isfinite(w.slice_seconds()) || w.slice_seconds() <= 0 || w.slice_seconds() > 1) {
    return InvalidArgument(
        "shared_host.core_wait.slice_seconds must be above 0 and at most 1, got ",
        w.slice_seconds());
  }
  return Status::OK();
}

// What only a CPU host has: how its ranks share its cores, and the costs of
// that (proto::SharedHost).
Status CheckSharedHost(const proto::Cluster& c) {
  const proto::SharedHost& h = c.shared_host();
  if (c.device().kind() != proto::Device::CPU) {
    return InvalidArgument(
        "shared_host is for clusters of CPU hosts whose ranks share cores; "
        "this device is a GPU");
  }
  if (h.core_sharing() == proto::SharedHost::EXCLUSIVE &&
      (c.ranks_per_device() == 0 || c.ranks_per_device() > c.device().cores())) {
    return InvalidArgument("ranks_per_device (", c.ranks_per_device(), ") exceeds device.cores (",
                           c.device().cores(), ") under shared_host.core_sharing EXCLUSIVE");
  }
  if (h.has_host_cores() && h.host_cores() < 1) {
    return InvalidArgument("shared_host.host_cores must be at least 1, got ", h.host_cores());
  }
  if (!std::isfinite(h.compute_comm_slowdown()) || h.compute_comm_slowdown() < 1) {
    return InvalidArgument("shared_host.compute_comm_slowdown must be at least 1, got ",
                           h.compute_comm_slowdown());
  }
  if (!std::isfinite(h.lockstep_slowdown()) || h.lockstep_slowdown() < 1 ||
      h.lockstep_slowdown() > 10) {
    return InvalidArgument("shared_host.lockstep_slowdown must be between 1 and 10, got ",
                           h.lockstep_slowdown());
  }
  if (h.has_shared_core_lockstep() &&
      (!std::isfinite(h.shared_core_lockstep()) || h.shared_core_lockstep() < 1 ||
       h.shared_core_lockstep() > 10)) {
    return InvalidArgument("shared_host.shared_core_lockstep must be between 1 and 10, got ",
                           h.shared_core_lockstep());
  }
  if (h.has_core_wait()) LOOM_RETURN_IF_ERROR(CheckCoreWait(h));
  if (h.has_intra_node()) {
    LOOM_RETURN_IF_ERROR(CheckHostLink("shared_host.intra_node", h.intra_node()));
  }
  if (h.has_inter_node()) {
    LOOM_RETURN_IF_ERROR(CheckHostLink("shared_host.inter_node", h.inter_node()));
  }
  return Status::OK();
}

}  // namespace

std::vector<std::string> ClusterPresetNames() {
  std::vector<std::string> names;
  for (const ClusterPresetFile& f : ClusterPresetFiles()) names.push_back(f.name);
  return names;
}

StatusOr<proto::Cluster> ParseCluster(const std::string& text,
                                      const std::string& origin) {
  proto::Cluster c;
  Status parsed = ParseTextProto(text, origin, &c);
  if (!parsed.ok()) {
    // A file written before the shared host's costs moved out of Link,
    // Device and Cluster names one of them where it no longer is.
    static const char* const kMoved[] = {"after_wait",
                                         "awake",
                                         "shared_cores",
                                         "call_cpu",
                                         "core_sharing",
                                         "host_cores",
                                         "compute_comm_slowdown",
                                         "core_wait",
                                         "lockstep_slowdown",
                                         "shared_core_lockstep"};
    for (const char* field : kMoved) {
      if (parsed.message().find(StrCat("no field named \"", field, "\"")) != std::string::npos) {
        return Status(parsed.code(),
                      StrCat(parsed.message(), " (", field,
                             " is now under shared_host { }, "
                             "with the per-link costs in shared_host { intra_node { } } or "
                             "inter_node: a file from an older loom profile; run it again)"));
      }
    }
    return parsed;
  }
  Status valid = ValidateCluster(c);
  if (!valid.ok()) return valid.WithContext(origin);
  return c;
}

StatusOr<proto::Cluster> LoadCluster(const std::string& name_or_file) {
  if (name_or_file.empty()) return InvalidArgument("no cluster given (--cluster)");
  if (IsPath(name_or_file)) {
    LOOM_ASSIGN_OR_RETURN(std::string text, ReadFile(name_or_file));
    return ParseCluster(text, name_or_file);
  }
  for (const ClusterPresetFile& f : ClusterPresetFiles()) {
    if (name_or_file == f.name) return ParseCluster(f.text, f.path);
  }
  std::string known;
  for (const std::string& n : ClusterPresetNames()) {
    known += (known.empty() ? "" : ", ") + n;
  }
  return NotFound("unknown cluster '", name_or_file, "' (presets: ", known,
                  "; a file name needs a '/' or the .pbtxt suffix)");
}

Status ValidateCluster(const proto::Cluster& c) {
  if (c.name().empty()) return InvalidArgument("name is missing");
  if (!c.has_device()) return InvalidArgument("device is missing");
  LOOM_RETURN_IF_ERROR(CheckDevice(c.device()));
  if (c.devices_per_node() < 1) {
    return InvalidArgument("devices_per_node must be at least 1, got ",
                           c.devices_per_node());
  }
  const bool cpu = c.device().kind() == proto::Device::CPU;
  if (c.ranks_per_device() < 0 || (!cpu && c.ranks_per_device() != 1)) {
    return InvalidArgument("ranks_per_device must be ", cpu ? "0 or more" : "1",
                           " for a ", cpu ? "CPU" : "GPU", ", got ",
                           c.ranks_per_device());
  }
  if (c.has_shared_host()) LOOM_RETURN_IF_ERROR(CheckSharedHost(c));
  // Before RanksPerNode multiplies them in an int.
  if (int64_t{c.devices_per_node()} * c.ranks_per_device() > kMaxRanksPerNode) {
    return InvalidArgument("devices_per_node (", c.devices_per_node(), ") x ranks_per_device (",
                           c.ranks_per_device(), ") exceeds ", kMaxRanksPerNode, " ranks a node");
  }
  const int per_node = RanksPerNode(c);
  if (per_node != 1) {
    if (!c.has_intra_node()) {
      return InvalidArgument("intra_node is missing (a node holds ",
                             per_node == 0 ? "every rank" : StrCat(per_node, " ranks"),
                             ")");
    }
    LOOM_RETURN_IF_ERROR(CheckLink("intra_node", c.intra_node()));
  }
  if (per_node != 0) {
    if (!c.has_inter_node()) {
      return InvalidArgument("inter_node is missing (a node holds ", per_node,
                             " rank(s), so larger groups span nodes)");
    }
    LOOM_RETURN_IF_ERROR(CheckLink("inter_node", c.inter_node()));
  }
  if (!std::isfinite(c.comm_compute_slowdown()) || c.comm_compute_slowdown() < 1) {
    return InvalidArgument("comm_compute_slowdown must be at least 1, got ",
                           c.comm_compute_slowdown());
  }
  return Status::OK();
}

Status SaveCluster(const proto::Cluster& cluster, const std::string& path) {
  return WriteFileAtomically(path, TextProtoToString(cluster));
}

const std::string& TableDevice(const proto::Cluster& cluster) {
  return cluster.cost_table_device().empty() ? cluster.name() : cluster.cost_table_device();
}

int64_t DeviceMemoryLimit(const proto::Cluster& cluster) {
  return cluster.device().kind() == proto::Device::CPU ? 0 : cluster.device().memory_bytes();
}

int RanksPerNode(const proto::Cluster& c) {
  return c.devices_per_node() * c.ranks_per_device();
}

int NodeOf(const proto::Cluster& c, int rank) {
  const int per_node = RanksPerNode(c);
  return per_node == 0 ? 0 : rank / per_node;
}

double DevicePeakFlops(const proto::Device& d, DataType dtype) {
  if (dtype == proto::BF16 && d.has_peak_bf16_flops()) return d.peak_bf16_flops();
  if (dtype == proto::FP16 && d.has_peak_fp16_flops()) return d.peak_fp16_flops();
  return d.peak_fp32_flops();
}

int64_t RankCacheShare(const proto::Cluster& c, int world_size) {
  const proto::Device& d = c.device();
  if (d.kind() != proto::Device::CPU || !d.has_cache_bytes()) return 0;
  const int per_device = c.ranks_per_device();
  const int sharing = c.shared_host().host_cores() > 0 || per_device == 0
                          ? world_size
                          : std::min(per_device, world_size);
  return d.cache_bytes() / std::max(1, sharing);
}

double StreamPeakFlops(const proto::Device& d, DataType dtype) {
  const double peak = DevicePeakFlops(d, dtype);
  return d.kind() == proto::Device::CPU ? peak / std::max(1, d.cores()) : peak;
}

double StreamSustainedFlops(const proto::Device& d, DataType dtype) {
  return StreamPeakFlops(d, dtype) * d.flops_efficiency();
}

double ProductWaveFraction(const proto::Device& d, int64_t batch, int64_t rows, int64_t cols) {
  if (!d.has_multiprocessors() || batch < 1 || rows < 1 || cols < 1) return 1;
  const double sms = d.multiprocessors();
  auto fraction = [&](int64_t tile_rows, int64_t tile_cols) {
    const int64_t tiles =
        batch * ((rows + tile_rows - 1) / tile_rows) * ((cols + tile_cols - 1) / tile_cols);
    const double waves = std::ceil(static_cast<double>(tiles) / sms);
    return static_cast<double>(batch) * static_cast<double>(rows) * static_cast<double>(cols) /
           (waves * sms * static_cast<double>(tile_rows * tile_cols));
  };
  return std::max(fraction(d.gemm_tile_rows(), d.gemm_tile_cols()),
                  fraction(d.gemm_tile_cols(), d.gemm_tile_rows()));
}

double StreamMemoryBandwidth(const proto::Device& d) {
  return d.kind() == proto::Device::CPU
             ? d.memory_bandwidth() / std::max(1, d.cores())
             : d.memory_bandwidth();
}

}  // namespace loom
