#include "passes/pipeline_partition.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <utility>

namespace loom {

StatusOr<ForwardCosts> ForwardCostsByLayer(const std::vector<Op*>& ops, const OpCostFn& cost_of) {
  int num_layers = 0;
  int first_layered = -1, last_layered = -1;
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    const Op* op = ops[i];
    if (!op->HasRole(role::kForward) || op->desc().layer() < 0) continue;
    num_layers = std::max(num_layers, op->desc().layer() + 1);
    if (first_layered < 0) first_layered = i;
    last_layered = i;
  }
  if (num_layers == 0) {
    return FailedPrecondition(
        "the program's forward ops carry no layer (OpDesc.layer), so there "
        "is nowhere to cut it into stages");
  }
  ForwardCosts costs;
  costs.layers.assign(num_layers, 0);
  int current = 0;
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    const Op* op = ops[i];
    if (!op->HasRole(role::kForward)) continue;
    LOOM_ASSIGN_OR_RETURN(const double op_cost, cost_of(*op));
    if (op->desc().layer() >= 0) {
      current = op->desc().layer();
      costs.layers[current] += op_cost;
    } else if (i < first_layered) {
      costs.pre += op_cost;
    } else if (i > last_layered) {
      costs.post += op_cost;
    } else {
      costs.layers[current] += op_cost;
    }
  }
  return costs;
}

std::vector<int> BalancedPartition(const std::vector<double>& layers, int parts,
                                   double pre, double post) {
  const int n = static_cast<int>(layers.size());
  std::vector<double> prefix(n + 1, 0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + layers[i];
  const double inf = std::numeric_limits<double>::infinity();
  // best[k][i]: the smallest largest-group cost of layers [0, i) in k groups.
  std::vector<std::vector<double>> best(parts + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> cut(parts + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0;
  for (int k = 1; k <= parts; ++k) {
    for (int i = k; i <= n - (parts - k); ++i) {
      for (int j = k - 1; j < i; ++j) {
        double group = prefix[i] - prefix[j] + (k == 1 ? pre : 0) +
                       (k == parts ? post : 0);
        double worst = std::max(best[k - 1][j], group);
        if (worst < best[k][i]) {
          best[k][i] = worst;
          cut[k][i] = j;
        }
      }
    }
  }
  std::vector<int> starts(parts);
  for (int k = parts, i = n; k >= 1; --k) {
    starts[k - 1] = cut[k][i];
    i = cut[k][i];
  }
  return starts;
}

// Stage 0 holds both ends of the model, `pre` (the embedding) and `post`
// (the head and loss). Layers go one at a time to the stage that stays
// cheapest, at their mean cost (a transformer's layers cost alike), so
// stage 0 takes fewer of them for the head; then each stage's layers split
// between its two chunks so that each chunk's cost, its end of the model
// included, is as even as whole layers allow. Every virtual stage keeps a
// layer.
std::vector<int> VShapedPartition(const std::vector<double>& layers, int stages, double pre,
                                  double post) {
  const int n = static_cast<int>(layers.size());
  double mean = 0;
  for (double c : layers) mean += c / n;
  if (mean <= 0) mean = 1;
  std::vector<int> count(stages, 2);
  // (cost with one more layer, stage): the cheapest on top.
  using Entry = std::pair<double, int>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> cheapest;
  auto extra = [&](int s) { return s == 0 ? pre + post : 0.0; };
  for (int s = 0; s < stages; ++s) cheapest.push({extra(s) + 3 * mean, s});
  for (int left = n - 2 * stages; left > 0; --left) {
    const int s = cheapest.top().second;
    cheapest.pop();
    ++count[s];
    cheapest.push({extra(s) + (count[s] + 1) * mean, s});
  }
  std::vector<int> in_virtual(2 * stages);
  for (int s = 0; s < stages; ++s) {
    const int k = count[s];
    // Chunk 0 keeps more micro-batches in flight (schedule_zbv.cc), so an
    // odd layer goes to chunk 1; on stage 0, which carries `pre` on chunk 0
    // and `post` on chunk 1, the layers even out their costs instead.
    int first = k / 2;
    if (s == 0) {
      first = std::clamp(static_cast<int>(std::lround((k * mean + post - pre) / (2 * mean))), 1,
                         k - 1);
    }
    in_virtual[s] = first;
    in_virtual[2 * stages - 1 - s] = k - first;
  }
  std::vector<int> starts(2 * stages, 0);
  for (int v = 1; v < 2 * stages; ++v) starts[v] = starts[v - 1] + in_virtual[v - 1];
  return starts;
}

std::vector<int> VirtualStageStarts(const ForwardCosts& costs, int stages, int chunks,
                                    bool v_shape) {
  if (v_shape) return VShapedPartition(costs.layers, stages, costs.pre, costs.post);
  const int v = stages * chunks;
  if (chunks > 1) {
    const int per_stage = static_cast<int>(costs.layers.size()) / v;
    std::vector<int> starts;
    for (int g = 0; g < v; ++g) starts.push_back(g * per_stage);
    return starts;
  }
  return BalancedPartition(costs.layers, v, costs.pre, costs.post);
}

}  // namespace loom
