#include "cost_model/op_cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

#include "cost_model/cluster.h"
#include "framework/op_registry.h"

namespace loom {
namespace {

// |log(a / b)| for two positive quantities; 0 when both are 0 (the
// dimension says nothing); nullopt when only one is 0 (not comparable).
std::optional<double> LogGap(double a, double b) {
  if (a <= 0 && b <= 0) return 0.0;
  if (a <= 0 || b <= 0) return std::nullopt;
  return std::abs(std::log(a / b));
}

std::string Fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", v);
  return buf;
}

}  // namespace

StatusOr<OpCost> OpCostEstimator::EstimateOp(const Op& op) const {
  auto cost = Estimate(op.type(), OpSignature(op), WorkOf(op));
  if (!cost.ok()) return cost.status().WithContext(op.Location());
  return cost;
}

DataType ComputeDtypeOf(const std::string& signature) {
  // Tensors print as "<dtype>[dims]"; the first floating one decides.
  size_t pos = 0;
  while ((pos = signature.find('[', pos)) != std::string::npos) {
    const size_t start = signature.rfind(' ', pos);
    const std::string name = signature.substr(
        start == std::string::npos ? 0 : start + 1,
        pos - (start == std::string::npos ? 0 : start + 1));
    for (DataType d : {proto::FP32, proto::FP16, proto::BF16, proto::FP64}) {
      if (name == DataTypeName(d)) return d;
    }
    ++pos;
  }
  return proto::FP32;
}

OpCostModel::OpCostModel(proto::Cluster cluster, CostTable table)
    : cluster_(std::move(cluster)), table_(std::move(table)) {
  Status valid = ValidateCluster(cluster_);
  CHECK(valid.ok()) << "OpCostModel over an invalid cluster '"
                    << cluster_.name() << "': " << valid.message();
}

// A matrix product's FLOPs take longer by the share of the device's tiles
// it leaves idle (ProductWaveFraction); a gradient's products have equal
// FLOPs.
double OpCostModel::ComputeSeconds(const OpWork& work, DataType dtype) const {
  const proto::Device& d = cluster_.device();
  const double rate = StreamSustainedFlops(d, dtype);
  if (work.num_products == 0) return work.flops / rate;
  double seconds = 0;
  for (int i = 0; i < work.num_products; ++i) {
    const OpWork::Product& p = work.products[i];
    seconds +=
        work.flops / work.num_products / rate / ProductWaveFraction(d, p.batch, p.rows, p.cols);
  }
  return seconds;
}

double OpCostModel::RooflineSeconds(const OpWork& work, DataType dtype) const {
  const proto::Device& d = cluster_.device();
  return d.kernel_launch_seconds() +
         std::max(ComputeSeconds(work, dtype), work.bytes / StreamMemoryBandwidth(d));
}

bool OpCostModel::ComputeBound(const OpWork& work, DataType dtype) const {
  return ComputeSeconds(work, dtype) >= work.bytes / StreamMemoryBandwidth(cluster_.device());
}

// Neighbour rule. The neighbour is the entry nearest in log space over
// (FLOPs, bytes): logs because a neighbour twice as large and one half as
// large are equally far, and both coordinates because two ops of one type
// with equal FLOPs but different bytes (a skinny and a square matmul) run
// at different efficiencies. Scaling is linear in the bound quantity, which
// is exact for an op running at a fixed fraction of its roofline; the
// nearer the neighbour, the less that fraction can have changed. Only the
// part of the neighbour's time above the launch overhead scales, so a tiny
// neighbour dominated by dispatch does not blow up a large op's estimate.
// Scaling limits (see Scaled).
constexpr double kMinWorkOverLaunch = 2.0;
constexpr double kMaxScale = 64.0;

std::optional<OpCost> OpCostModel::Scaled(const std::string& type,
                                          const OpWork& work,
                                          DataType dtype) const {
  const bool compute_bound = ComputeBound(work, dtype);
  const double wanted = compute_bound ? work.flops : work.bytes;
  if (wanted <= 0) return std::nullopt;
  const proto::CostEntry* best = nullptr;
  double best_distance = std::numeric_limits<double>::infinity();
  for (const proto::CostEntry* e : table_.OfType(type, TableDevice(cluster_))) {
    if (ComputeDtypeOf(e->signature()) != dtype) continue;
    const double have = compute_bound ? e->flops() : e->bytes();
    if (have <= 0) continue;
    const auto df = LogGap(work.flops, e->flops());
    const auto db = LogGap(work.bytes, e->bytes());
    if (!df || !db) continue;
    const double distance = std::hypot(*df, *db);
    // Ties go to the earlier entry: file order, so the choice is stable.
    if (distance < best_distance) {
      best_distance = distance;
      best = e;
    }
  }
  if (best == nullptr) return std::nullopt;
  const double launch = cluster_.device().kernel_launch_seconds();
  const double ratio = wanted / (compute_bound ? best->flops() : best->bytes());
  // A neighbour whose time is mostly the fixed cost of running an op says
  // nothing about the rate of its work, and a rate carried across more than
  // kMaxScale holds no better than the roofline: a scalar fill_constant
  // scaled to a [vocab, hidden] one came out 400x too slow.
  if (best->median_seconds() < kMinWorkOverLaunch * launch || ratio > kMaxScale ||
      ratio < 1 / kMaxScale) {
    return std::nullopt;
  }
  OpCost cost;
  cost.seconds =
      launch + std::max(0.0, best->median_seconds() - launch) * ratio;
  cost.rule = CostRule::kScaled;
  cost.basis = StrCat(compute_bound ? "FLOPs" : "bytes", " x", Fmt(ratio),
                      " of '", best->signature(), "'");
  return cost;
}

bool NoWorkView(const std::string& type, const OpWork& work) {
  const OpSchema* schema = OpRegistry::Global().Find(type);
  return schema != nullptr && (!schema->view_of().empty() || !schema->join_of().empty()) &&
         work.flops <= 0 && work.bytes <= 0;
}

StatusOr<OpCost> OpCostModel::Estimate(const std::string& type,
                                       const std::string& signature,
                                       const OpWork& work) const {
  // A view (or a join whose parts were written in place) has no work
  // (WorkOf), whatever a profile of its type measured (a split that copies
  // may share a view's signature); one that copies has bytes to price.
  if (NoWorkView(type, work)) {
    return OpCost{0, CostRule::kRoofline, "a view, or a join written in place: no work"};
  }
  if (const proto::CostEntry* e = table_.Find(signature, TableDevice(cluster_))) {
    OpCost cost{e->median_seconds(), CostRule::kProfiled, signature};
    if (e->has_cold_input_bytes()) cost.cold_input_bytes = e->cold_input_bytes();
    return cost;
  }
  if (CommKindOf(type) != CommKind::kNone && work.flops <= 0) {
    return FailedPrecondition("'", signature,
                              "' only communicates: the communication model "
                              "prices it");
  }
  if (work.flops <= 0 && work.bytes <= 0) {
    return NotFound("no cost for '", signature, "': no entry on device '",
                    cluster_.name(), "' and no work to price (0 FLOPs, 0 bytes)");
  }
  const DataType dtype = ComputeDtypeOf(signature);
  if (auto scaled = Scaled(type, work, dtype)) return *scaled;
  OpCost cost;
  cost.seconds = RooflineSeconds(work, dtype);
  cost.rule = CostRule::kRoofline;
  cost.basis = ComputeBound(work, dtype)
                   ? StrCat("compute-bound: ", Fmt(work.flops), " FLOP")
                   : StrCat("memory-bound: ", Fmt(work.bytes), " bytes");
  return cost;
}

}  // namespace loom
