#include "runtime/straggler_watch.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

#include "framework/median.h"
#include "framework/status.h"
#include "runtime/parallel_trainer.h"

namespace loom {

StragglerWatch::StragglerWatch(std::vector<int> peer_group, StragglerOptions options)
    : peer_group_(std::move(peer_group)),
      options_(options),
      slow_windows_(peer_group_.size(), 0),
      first_slow_step_(peer_group_.size(), 0) {}

namespace {

// The median of sorted `v` without its element `skip`.
double MedianWithout(const std::vector<double>& v, size_t skip) {
  const size_t n = v.size() - 1;
  if (n == 0) return 0;
  // The k-th of the others is v[k] below `skip`, v[k + 1] from it on.
  auto at = [&](size_t k) { return v[k < skip ? k : k + 1]; };
  return n % 2 == 1 ? at(n / 2) : 0.5 * (at(n / 2 - 1) + at(n / 2));
}

}  // namespace

std::vector<std::string> StragglerWatch::AddWindow(int64_t first_step, int64_t last_step,
                                                   const std::vector<double>& median_seconds) {
  // Each group's medians, sorted once: a rank's peers' median is its
  // group's without it, so a window costs n log n, not n^2.
  std::map<int, std::vector<std::pair<double, int>>> groups;
  for (size_t r = 0; r < peer_group_.size(); ++r) {
    groups[peer_group_[r]].push_back({median_seconds[r], static_cast<int>(r)});
  }
  std::vector<std::string> lines;
  for (auto& [group, members] : groups) {
    std::sort(members.begin(), members.end());
    std::vector<double> sorted;
    for (const auto& m : members) sorted.push_back(m.first);
    for (size_t i = 0; i < members.size(); ++i) {
      const int r = members[i].second;
      const size_t peers = members.size() - 1;
      const double theirs = MedianWithout(sorted, i);
      const bool slow = peers > 0 && median_seconds[r] > options_.ratio * theirs;
      if (!slow) {
        slow_windows_[r] = 0;
        continue;
      }
      if (slow_windows_[r] == 0) first_slow_step_[r] = first_step;
      if (++slow_windows_[r] != options_.windows) continue;
      char line[256];
      std::snprintf(line, sizeof(line),
                    "straggler: rank %d's kernels took a median %.2f ms per step against %.2f ms "
                    "on its %zu peer(s) of the same stage, steps %lld-%lld",
                    r, median_seconds[r] * 1e3, theirs * 1e3, peers,
                    static_cast<long long>(first_slow_step_[r]),
                    static_cast<long long>(last_step));
      lines.push_back(line);
    }
  }
  return lines;
}

namespace {

// Each rank's peer group: its pipeline stage.
std::vector<int> StagesOf(const Plan& plan) {
  std::vector<int> stages;
  for (const RankPlan& rank : plan.ranks) stages.push_back(rank.coords.pp);
  return stages;
}

}  // namespace

StragglerTracker::StragglerTracker(const ParallelTrainer& trainer, Communicator* all_ranks,
                                   StragglerOptions options,
                                   std::function<void(const std::string&)> report)
    : trainer_(trainer),
      all_ranks_(all_ranks),
      options_(options),
      report_(std::move(report)),
      watch_(StagesOf(trainer.plan()), options),
      window_(trainer.local_ranks().size()) {}

Status StragglerTracker::AfterStep(int64_t step) {
  if (options_.window_steps <= 0) return Status::OK();
  if (window_first_step_ < 0) window_first_step_ = step;
  const std::vector<int>& local = trainer_.local_ranks();
  for (size_t i = 0; i < local.size(); ++i) {
    window_[i].push_back(trainer_.LastComputeSeconds(local[i]));
  }
  if (static_cast<int>(window_.front().size()) < options_.window_steps) return Status::OK();
  // Every rank's median, in rank order; the other processes' slots are 0
  // here, and the sum over all of them fills them in.
  const int world = static_cast<int>(trainer_.plan().ranks.size());
  Tensor medians(TensorMeta{proto::FP64, {world}});
  double* m = medians.data<double>();
  std::fill(m, m + world, 0.0);
  for (size_t i = 0; i < local.size(); ++i) {
    m[local[i]] = Median(window_[i]);
    window_[i].clear();
  }
  if (all_ranks_ != nullptr) {
    LOOM_RETURN_IF_ERROR(all_ranks_->AllReduce({&medians}, ReduceOp::kSum)
                             .WithContext("straggler watch"));
  }
  const int64_t first = window_first_step_;
  window_first_step_ = -1;
  if (std::find(local.begin(), local.end(), 0) == local.end()) return Status::OK();
  for (const std::string& line : watch_.AddWindow(first, step, std::vector<double>(m, m + world))) {
    report_(line);
  }
  return Status::OK();
}

}  // namespace loom
