// Cluster descriptions: the presets, files with mistakes in them, and the
// topology and rate questions the cost model asks.
#include <dirent.h>

#include <fstream>

#include <gtest/gtest.h>

#include "cost_model/cluster.h"
#include "framework/file_util.h"

namespace loom {
namespace {

TEST(Cluster, EveryPresetLoadsAndValidates) {
  const std::vector<std::string> names = ClusterPresetNames();
  EXPECT_EQ(names, (std::vector<std::string>{"a100", "emulated", "h100", "local"}));
  for (const std::string& name : names) {
    auto c = LoadCluster(name);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->name(), name);
    // The built-in copy is the file in configs/clusters/.
    auto file = LoadCluster("configs/clusters/" + name + ".pbtxt");
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ(file->SerializeAsString(), c->SerializeAsString()) << name;
  }
}

TEST(Cluster, EveryFileInConfigsIsAPreset) {
  int files = 0;
  DIR* d = opendir("configs/clusters");
  ASSERT_NE(d, nullptr);
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() < 7 || name.substr(name.size() - 6) != ".pbtxt") continue;
    ++files;
    EXPECT_TRUE(LoadCluster(name.substr(0, name.size() - 6)).ok()) << name;
  }
  closedir(d);
  EXPECT_EQ(files, static_cast<int>(ClusterPresetNames().size()));
}

TEST(Cluster, GpuPresetsCarryTheirPublishedPeaks) {
  const proto::Cluster a100 = LoadCluster("a100").value();
  EXPECT_EQ(a100.devices_per_node(), 8);
  EXPECT_DOUBLE_EQ(a100.device().peak_bf16_flops(), 312e12);
  EXPECT_DOUBLE_EQ(a100.inter_node().bandwidth(), 25e9);  // 200 Gb/s
  const proto::Cluster h100 = LoadCluster("h100").value();
  // NVLink: 900 GB/s both ways, 450 one way, of which NCCL sustains 370
  // (and on a100 240 of 300).
  EXPECT_DOUBLE_EQ(h100.intra_node().bandwidth(), 370e9);
  EXPECT_DOUBLE_EQ(a100.intra_node().bandwidth(), 240e9);
  EXPECT_DOUBLE_EQ(h100.inter_node().bandwidth(), 50e9);   // 400 Gb/s
  EXPECT_DOUBLE_EQ(DevicePeakFlops(h100.device(), proto::BF16), 989.5e12);
  EXPECT_DOUBLE_EQ(DevicePeakFlops(h100.device(), proto::FP32), 67e12);
  // A GPU stream has the whole device.
  EXPECT_DOUBLE_EQ(StreamPeakFlops(h100.device(), proto::BF16), 989.5e12);
  // The a100's one calibrated value (docs/megatron_validation.md); the
  // h100's is not measured, so its kernels sustain the peak.
  EXPECT_DOUBLE_EQ(a100.device().flops_efficiency(), 0.883);
  EXPECT_DOUBLE_EQ(StreamSustainedFlops(a100.device(), proto::BF16), 0.883 * 312e12);
  EXPECT_DOUBLE_EQ(StreamSustainedFlops(h100.device(), proto::BF16), 989.5e12);
}

TEST(Cluster, ParseErrorsNameFileLineAndField) {
  auto c = ParseCluster("name: \"x\"\ndevice {\n  kind: CPU\n  coress: 2\n}\n",
                        "my.pbtxt");
  EXPECT_EQ(c.status().message(),
            "my.pbtxt: line 4, column 9: Message type \"loom.proto.Device\" has "
            "no field named \"coress\"");
  // A file from before the shared host's costs had a message of their own
  // is told where the field went.
  auto old =
      ParseCluster("name: \"x\"\ndevice {\n  kind: CPU\n  core_sharing: PINNED\n}\n", "old.pbtxt");
  EXPECT_EQ(old.status().message(),
            "old.pbtxt: line 4, column 15: Message type \"loom.proto.Device\" has no field named "
            "\"core_sharing\" (core_sharing is now under shared_host { }, with the per-link "
            "costs in shared_host { intra_node { } } or inter_node: a file from an older loom "
            "profile; run it again)");
  EXPECT_EQ(LoadCluster("/nonexistent/c.pbtxt").status().message(),
            "/nonexistent/c.pbtxt: cannot open");
  EXPECT_EQ(LoadCluster("tpu").status().message(),
            "unknown cluster 'tpu' (presets: a100, emulated, h100, local; a "
            "file name needs a '/' or the .pbtxt suffix)");
}

// The local preset with one field changed by `edit`.
std::string Validate(const std::function<void(proto::Cluster&)>& edit) {
  proto::Cluster c = LoadCluster("local").value();
  edit(c);
  return ValidateCluster(c).message();
}

// Values only a typo or a corrupt file gives are refused, not priced: a
// node of 65536 x 65536 ranks (which overflowed an int into one node), a
// latency of 1e300 s, a link of 1e300 B/s.
TEST(Cluster, AbsurdSizesAndTimesAreRefused) {
  EXPECT_EQ(Validate([](proto::Cluster& c) {
              c.set_devices_per_node(65536);
              c.set_ranks_per_device(65536);
            }),
            "devices_per_node (65536) x ranks_per_device (65536) exceeds 1048576 ranks a node");
  EXPECT_EQ(Validate([](proto::Cluster& c) { c.mutable_intra_node()->set_latency_seconds(1e300); }),
            "intra_node.latency_seconds must be 0 to 1 s, got 1e+300");
  EXPECT_EQ(Validate([](proto::Cluster& c) { c.mutable_intra_node()->set_latency_seconds(-1e-6); }),
            "intra_node.latency_seconds must be 0 to 1 s, got -1e-06");
  EXPECT_EQ(Validate([](proto::Cluster& c) { c.mutable_intra_node()->set_bandwidth(1e300); }),
            "intra_node.bandwidth must be at most 1e+15, got 1e+300");
  EXPECT_EQ(Validate([](proto::Cluster& c) { c.mutable_device()->set_kernel_launch_seconds(5); }),
            "device.kernel_launch_seconds must be 0 to 1 s, got 5");
  EXPECT_EQ(Validate([](proto::Cluster& c) { c.mutable_device()->set_peak_fp32_flops(1e30); }),
            "device.peak_fp32_flops must be at most 1e+18, got 1e+30");
  // Every preset is within the bounds.
  for (const std::string& name : ClusterPresetNames()) {
    EXPECT_TRUE(ValidateCluster(LoadCluster(name).value()).ok()) << name;
  }
}

TEST(Cluster, ValidationNamesTheField) {
  EXPECT_EQ(Validate([](proto::Cluster& c) { c.mutable_device()->set_peak_fp32_flops(0); }),
            "device.peak_fp32_flops must be positive, got 0");
  EXPECT_EQ(Validate([](proto::Cluster& c) {
              c.mutable_intra_node()->set_bandwidth(-1);
            }),
            "intra_node.bandwidth must be positive, got -1");
  EXPECT_EQ(Validate([](proto::Cluster& c) { c.mutable_device()->set_flops_efficiency(1.5); }),
            "device.flops_efficiency must be in (0, 1], got 1.5");
  EXPECT_EQ(Validate([](proto::Cluster& c) { c.mutable_device()->set_flops_efficiency(0); }),
            "device.flops_efficiency must be in (0, 1], got 0");
  EXPECT_EQ(Validate([](proto::Cluster& c) { c.mutable_device()->set_cores(0); }),
            "device.cores must be at least 1 for a CPU, got 0");
  // How a GPU tiles its products: all three fields or none, on a GPU.
  EXPECT_EQ(Validate([](proto::Cluster& c) { c.mutable_device()->set_multiprocessors(108); }),
            "device.multiprocessors, gemm_tile_rows and gemm_tile_cols go together; the "
            "cluster has 1 of them");
  const auto tiled = [](proto::Cluster& c) {
    c.mutable_device()->set_multiprocessors(108);
    c.mutable_device()->set_gemm_tile_rows(256);
    c.mutable_device()->set_gemm_tile_cols(128);
  };
  EXPECT_EQ(Validate(tiled), "device.multiprocessors and the GEMM tile are for GPUs");
  proto::Cluster a100 = LoadCluster("a100").value();
  a100.mutable_device()->set_gemm_tile_cols(0);
  EXPECT_EQ(ValidateCluster(a100).message(), "device.gemm_tile_cols must be 1..65536, got 0");
  EXPECT_EQ(Validate([](proto::Cluster& c) { c.set_comm_compute_slowdown(0.5); }),
            "comm_compute_slowdown must be at least 1, got 0.5");
  EXPECT_EQ(
      Validate([](proto::Cluster& c) { c.mutable_shared_host()->set_compute_comm_slowdown(0.9); }),
      "shared_host.compute_comm_slowdown must be at least 1, got 0.9");
  EXPECT_EQ(
      Validate([](proto::Cluster& c) { c.mutable_shared_host()->set_lockstep_slowdown(0.97); }),
      "shared_host.lockstep_slowdown must be between 1 and 10, got 0.97");
  EXPECT_EQ(
      Validate([](proto::Cluster& c) { c.mutable_shared_host()->set_shared_core_lockstep(12); }),
      "shared_host.shared_core_lockstep must be between 1 and 10, got 12");
  EXPECT_EQ(Validate([](proto::Cluster& c) {
              c.mutable_intra_node()->clear_collective();
              proto::CollectiveCost* k = c.mutable_intra_node()->add_collective();
              k->set_kind("alltoall");
              k->set_bandwidth(1);
            }),
            "intra_node.collective[0].kind 'alltoall' is not allreduce, allgather, "
            "reduce_scatter, broadcast or send");
  EXPECT_EQ(Validate([](proto::Cluster& c) {
              c.mutable_shared_host()->mutable_intra_node()->mutable_after_wait()->set_bandwidth(0);
            }),
            "shared_host.intra_node.after_wait.bandwidth must be positive, got 0");
  // One rank per node: groups of two cross nodes, so the inter-node link
  // is needed.
  EXPECT_EQ(Validate([](proto::Cluster& c) { c.set_ranks_per_device(1); }),
            "inter_node is missing (a node holds 1 rank(s), so larger groups "
            "span nodes)");
  EXPECT_EQ(Validate([](proto::Cluster& c) {
              c.mutable_shared_host()->set_core_sharing(proto::SharedHost::EXCLUSIVE);
            }),
            "ranks_per_device (0) exceeds device.cores (2) under shared_host.core_sharing "
            "EXCLUSIVE");
  EXPECT_EQ(Validate([](proto::Cluster& c) { c.mutable_device()->set_kind(proto::Device::GPU); }),
            "device.cores is for CPUs; this device is a GPU");
  // A GPU cluster holds only GPU facts: no shared host's.
  proto::Cluster gpu = LoadCluster("h100").value();
  EXPECT_FALSE(gpu.has_shared_host());
  gpu.mutable_shared_host()->set_host_cores(2);
  EXPECT_EQ(ValidateCluster(gpu).message(),
            "shared_host is for clusters of CPU hosts whose ranks share cores; this device is a "
            "GPU");
  EXPECT_EQ(Validate([](proto::Cluster& c) {
              c.mutable_device()->set_kind(proto::Device::GPU);
              c.mutable_device()->clear_cores();
            }),
            "ranks_per_device must be 1 for a GPU, got 0");
  auto core_wait = [](proto::Cluster& c, double waits, double slice) {
    c.mutable_shared_host()->mutable_core_wait()->set_waits(waits);
    c.mutable_shared_host()->mutable_core_wait()->set_slice_seconds(slice);
  };
  EXPECT_EQ(Validate([&](proto::Cluster& c) { core_wait(c, 2, 0); }),
            "shared_host.core_wait.slice_seconds must be above 0 and at most 1, got 0");
  EXPECT_EQ(Validate([&](proto::Cluster& c) { core_wait(c, -1, 1e-3); }),
            "shared_host.core_wait.waits must be 0 to 100, got -1");
  EXPECT_EQ(Validate([&](proto::Cluster& c) {
              c.mutable_shared_host()->mutable_intra_node()->mutable_awake()->set_bandwidth(-1);
            }),
            "shared_host.intra_node.awake.bandwidth must be positive, got -1");
  EXPECT_EQ(
      Validate([&](proto::Cluster& c) {
        c.mutable_shared_host()->mutable_intra_node()->mutable_shared_cores()->set_bandwidth(0);
      }),
      "shared_host.intra_node.shared_cores.bandwidth must be positive, got 0");
  EXPECT_EQ(
      Validate([&](proto::Cluster& c) {
        c.mutable_shared_host()->mutable_intra_node()->mutable_call_cpu()->set_seconds_per_call(
            -1e-4);
      }),
      "shared_host.intra_node.call_cpu.seconds_per_call must be 0 to 1, got -0.0001");
  EXPECT_EQ(
      Validate([&](proto::Cluster& c) {
        c.mutable_shared_host()->mutable_intra_node()->mutable_call_cpu()->clear_bytes_per_second();
      }),
      "shared_host.intra_node.call_cpu.bytes_per_second is missing");
  EXPECT_EQ(
      Validate([&](proto::Cluster& c) {
        c.mutable_shared_host()->mutable_intra_node()->mutable_call_cpu()->set_bytes_per_second(0);
      }),
      "shared_host.intra_node.call_cpu.bytes_per_second must be positive, got 0");
  EXPECT_EQ(Validate([&](proto::Cluster& c) {
              core_wait(c, 2, 1e-3);
              c.mutable_shared_host()->set_core_sharing(proto::SharedHost::TIME_SLICED);
            }),
            "shared_host.core_wait is for ranks that keep to their cores "
            "(shared_host.core_sharing PINNED)");
}

TEST(Cluster, ValidationErrorsFromAFileNameIt) {
  const std::string path = ::testing::TempDir() + "/loom_cluster_bad.pbtxt";
  proto::Cluster c = LoadCluster("a100").value();
  c.mutable_inter_node()->clear_latency_seconds();
  ASSERT_TRUE(SaveCluster(c, path).ok());
  EXPECT_EQ(LoadCluster(path).status().message(),
            path + ": inter_node.latency_seconds is missing");
}

TEST(Cluster, ConsecutiveRanksFillANode) {
  const proto::Cluster a100 = LoadCluster("a100").value();
  EXPECT_EQ(RanksPerNode(a100), 8);
  EXPECT_EQ(NodeOf(a100, 0), 0);
  EXPECT_EQ(NodeOf(a100, 7), 0);
  EXPECT_EQ(NodeOf(a100, 8), 1);
  EXPECT_EQ(NodeOf(a100, 1023), 127);
  // Every rank of a local job shares the one host.
  const proto::Cluster local = LoadCluster("local").value();
  EXPECT_EQ(RanksPerNode(local), 0);
  EXPECT_EQ(NodeOf(local, 15), 0);
  // The emulated network puts each rank on its own node.
  const proto::Cluster emulated = LoadCluster("emulated").value();
  EXPECT_EQ(NodeOf(emulated, 0), 0);
  EXPECT_EQ(NodeOf(emulated, 3), 3);
}

TEST(Cluster, CpuStreamsGetOneCore) {
  const proto::Cluster local = LoadCluster("local").value();
  const proto::Device& d = local.device();
  EXPECT_DOUBLE_EQ(StreamPeakFlops(d, proto::FP32), d.peak_fp32_flops() / d.cores());
  EXPECT_DOUBLE_EQ(StreamMemoryBandwidth(d), d.memory_bandwidth() / d.cores());
  // No bf16 rate on this CPU: the fp32 one applies.
  EXPECT_DOUBLE_EQ(DevicePeakFlops(d, proto::BF16), d.peak_fp32_flops());
  // How ranks share the cores: cost_model_timer_test.
}

}  // namespace
}  // namespace loom
