// Results a pass computes from the program that every rank of one planning
// call reads in place, kept for the other ranks (in the spirit of MLIR's
// analysis manager, across ranks instead of across passes):
// pipeline-split's cut and placement are the same on every stage, and
// costing a 96-layer program for each of 16 stages took a fifth of
// planning gpt3-175b. Owned by the planning call (PlanRanks), so that a
// program's address identifies it while the results live. Not thread-safe:
// one call plans its ranks in turn.
#ifndef LOOM_PASSES_SHARED_ANALYSES_H_
#define LOOM_PASSES_SHARED_ANALYSES_H_

#include <map>
#include <memory>
#include <string>
#include <utility>

namespace loom {

class SharedAnalyses {
 public:
  // The result stored under `key`, or null. `key` must name everything
  // the result depends on besides the shared program and what every
  // context of the call shares (its cost and comm models): the pass and
  // its options. T must be the type stored under it.
  template <typename T>
  const T* Find(const std::string& key) const {
    auto it = results_.find(key);
    return it == results_.end() ? nullptr : static_cast<const T*>(it->second.get());
  }
  template <typename T>
  const T& Store(const std::string& key, T result) {
    std::shared_ptr<const void> held = std::make_shared<const T>(std::move(result));
    const T& out = *static_cast<const T*>(held.get());
    results_[key] = std::move(held);
    return out;
  }

 private:
  std::map<std::string, std::shared_ptr<const void>> results_;
};

}  // namespace loom

#endif  // LOOM_PASSES_SHARED_ANALYSES_H_
