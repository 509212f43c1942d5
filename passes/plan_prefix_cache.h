// The rank contexts after a pipeline's leading passes, kept for the other
// plans of a search that run the same ones. Strategies that differ only in
// their schedule run the same pipeline-split, tensor-parallel,
// gradient-accumulation, data-parallel and sharding passes on each stage;
// a `loom tune` search plans thousands of such strategies, so it plans
// that shared part of a stage once and forks it for the rest.
//
// The planner (passes/planner.h) splits a pipeline before the first pass
// that reads the schedule or the jobs (LeadingPassesEnd) and keys a
// context by everything its leading passes read: the passes as printed
// (every option), the rank and its grid, and which programs and costs
// they planned from. Thread-safe. Holds at most `capacity` contexts; the
// one used least recently goes first.
#ifndef LOOM_PASSES_PLAN_PREFIX_CACHE_H_
#define LOOM_PASSES_PLAN_PREFIX_CACHE_H_

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "passes/pass.h"
#include "passes/pass_pipeline.h"

namespace loom {

// The index of the first entry of `pipeline` that reads the schedule or
// the jobs (op-split, split-backward, job-split, schedule): the entries
// before it plan a stage alike under every schedule.
size_t LeadingPassesEnd(const PassPipeline& pipeline);

// The first `end` entries of `pipeline` as printed, every option included:
// what a context after them is stored under, with the rank's place.
std::string LeadingPassesText(const PassPipeline& pipeline, size_t end);

class PlanPrefixCache {
 public:
  explicit PlanPrefixCache(size_t capacity = 128) : capacity_(capacity) {}

  // A fork of the context stored under `key`, or nothing (counted as a
  // hit or a miss).
  std::optional<PassContext> Find(const std::string& key);
  // Keeps a fork of `ctx` under `key`.
  void Store(const std::string& key, const PassContext& ctx);

  int64_t hits() const;
  int64_t misses() const;

 private:
  using Entry = std::pair<std::string, std::unique_ptr<const PassContext>>;

  const size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  int64_t hits_ = 0, misses_ = 0;
};

}  // namespace loom

#endif  // LOOM_PASSES_PLAN_PREFIX_CACHE_H_
