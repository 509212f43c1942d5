// The cluster description (cluster.proto): presets, files, validation, and
// the questions the cost model asks of it (which node a rank is on, what
// one stream computes at, how busy threads share a CPU).
#ifndef LOOM_COST_MODEL_CLUSTER_H_
#define LOOM_COST_MODEL_CLUSTER_H_

#include <string>
#include <vector>

#include "cost_model/cluster.pb.h"
#include "framework/status.h"
#include "framework/types.h"

namespace loom {

// A preset name ("local", "emulated", "a100", "h100": the files of
// configs/clusters/, built into the binary) or the path of a text-format
// file; anything with a '/' or ending in ".pbtxt" is a path. The result is
// validated. Errors name the file (the preset's source file for a preset),
// then the line and field, or the field that fails validation.
StatusOr<proto::Cluster> LoadCluster(const std::string& name_or_file);
// `origin` names the text in errors.
StatusOr<proto::Cluster> ParseCluster(const std::string& text,
                                      const std::string& origin);
std::vector<std::string> ClusterPresetNames();

// Rates positive, counts sensible, the links the topology can use present.
// Messages name the field, e.g. "device.peak_fp32_flops must be positive,
// got 0".
Status ValidateCluster(const proto::Cluster& cluster);

// Writes text format atomically.
Status SaveCluster(const proto::Cluster& cluster, const std::string& path);

// The device name whose cost-table entries price the cluster's ops:
// cost_table_device, else the cluster's name.
const std::string& TableDevice(const proto::Cluster& cluster);

// The memory one rank's peak must fit: a GPU's memory_bytes; 0 on a CPU
// cluster, whose ranks share the host (`loom run` checks it as it
// allocates).
int64_t DeviceMemoryLimit(const proto::Cluster& cluster);

// Ranks one node holds; 0 when every rank is on one node.
int RanksPerNode(const proto::Cluster& cluster);
// Consecutive ranks fill a node.
int NodeOf(const proto::Cluster& cluster, int rank);

// Peak FLOP/s of the whole device for arithmetic in `dtype`: the bf16 or
// fp16 rate where the device has one, else the fp32 rate.
double DevicePeakFlops(const proto::Device& device, DataType dtype);
// What one stream of a rank can use: a CPU stream runs its kernels on one
// thread, so it gets one core's share of the device; a GPU stream gets the
// whole device.
double StreamPeakFlops(const proto::Device& device, DataType dtype);
// What one stream's compute-bound kernels sustain: StreamPeakFlops times
// the device's flops_efficiency. The roofline prices with it.
double StreamSustainedFlops(const proto::Device& device, DataType dtype);
double StreamMemoryBandwidth(const proto::Device& device);

// The fraction of `device`'s tiles over its waves that a matrix product
// with a [batch, rows, cols] output keeps busy (cluster.proto,
// multiprocessors): 1 where the device does not say how it tiles.
double ProductWaveFraction(const proto::Device& device, int64_t batch, int64_t rows, int64_t cols);

// The bytes of its device's cache (Device.cache_bytes) one rank of a plan
// of `world_size` ranks keeps its tensors in: an equal share among the
// device's ranks (every rank, where the cluster's nodes are emulated on
// one host). 0 where the cluster gives no cache, or on a GPU.
int64_t RankCacheShare(const proto::Cluster& cluster, int world_size);

}  // namespace loom

#endif  // LOOM_COST_MODEL_CLUSTER_H_
