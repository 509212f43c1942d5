#include "passes/plan_prefix_cache.h"

#include <set>
#include <vector>

namespace loom {

size_t LeadingPassesEnd(const PassPipeline& pipeline) {
  // op-split and split-backward take the schedule's shape; job-split and
  // schedule make the jobs.
  static const std::set<std::string> kReadSchedule = {"op-split", "split-backward", "job-split",
                                                      "schedule"};
  const auto& entries = pipeline.entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    if (kReadSchedule.count(entries[i].info->name)) return i;
  }
  return entries.size();
}

std::string LeadingPassesText(const PassPipeline& pipeline, size_t end) {
  std::vector<PipelineEntry> written;
  for (size_t i = 0; i < end && i < pipeline.entries().size(); ++i) {
    const PassPipeline::Entry& e = pipeline.entries()[i];
    written.push_back({e.info->name, PassOptionsText(*e.info, e.options)});
  }
  return PrintPipeline(written);
}

// Forks run under the lock: a Program being cloned must not be read by
// another thread at once (Block::OpIndex renumbers lazily).
std::optional<PassContext> PlanPrefixCache::Find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++misses_;
    return std::nullopt;
  }
  ++hits_;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second->Fork();
}

void PlanPrefixCache::Store(const std::string& key, const PassContext& ctx) {
  if (capacity_ == 0) return;
  auto fork = std::make_unique<const PassContext>(ctx.Fork());
  std::lock_guard<std::mutex> lock(mu_);
  if (index_.count(key)) return;  // another thread planned it meanwhile
  lru_.emplace_front(key, std::move(fork));
  index_[key] = lru_.begin();
  if (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

int64_t PlanPrefixCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

int64_t PlanPrefixCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

}  // namespace loom
