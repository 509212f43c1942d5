// Comparing every parameter a parallel run holds with serial training's:
// shared by the parity tests of every layout, schedule and sharding stage.
#ifndef LOOM_UNITTESTS_PARAMETER_COMPARE_H_
#define LOOM_UNITTESTS_PARAMETER_COMPARE_H_

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/parallel_trainer.h"
#include "runtime/serial_trainer.h"

namespace loom {

// `full` restricted to [start, start + part) along `axis`.
inline std::vector<float> Slice(const std::vector<float>& full, const Shape& shape, int axis,
                         int64_t start, int64_t part) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  std::vector<float> out;
  out.reserve(outer * part * inner);
  for (int64_t o = 0; o < outer; ++o) {
    const auto first = full.begin() + (o * shape[axis] + start) * inner;
    out.insert(out.end(), first, first + part * inner);
  }
  return out;
}

// The largest elementwise difference; sizes must agree.
inline double WorstDifference(const std::vector<float>& have, const std::vector<float>& want) {
  EXPECT_EQ(have.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(have.size(), want.size()); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(have[i] - want[i])));
  }
  return worst;
}

// Compares every parameter each rank holds with the serial one, sliced to
// the rank's tensor-parallel shard where the shapes differ, and those no
// rank holds whole (ZeRO-3 keeps each rank's part of a bucket) as the
// run's merged state has them; returns how many it compared.
inline int ExpectEveryParameterMatches(ParallelTrainer& t, SerialTrainer& serial, double tolerance) {
  int compared = 0;
  std::set<std::string> unheld;
  for (int r : t.local_ranks()) {
    const RankPlan& rp = t.plan().ranks[r];
    for (const auto& [name, var] : rp.startup().global_block().vars()) {
      if (!var.is_parameter()) continue;
      const Tensor* got = t.rank_scope(r).FindLocal(name);
      const Tensor* full = serial.scope().Find(name);
      if (got == nullptr || !got->initialized()) {
        unheld.insert(name);
        continue;
      }
      EXPECT_NE(full, nullptr) << name;
      if (full == nullptr) continue;
      std::vector<float> want = full->ToFloatVector();
      if (got->shape() != full->shape()) {
        int axis = 0;
        while (axis < got->rank() && got->dim(axis) == full->dim(axis)) ++axis;
        EXPECT_LT(axis, got->rank()) << name;
        if (axis >= got->rank()) continue;
        const int64_t part = got->dim(axis);
        want = Slice(want, full->shape(), axis, rp.coords.mp * part, part);
      }
      EXPECT_LT(WorstDifference(got->ToFloatVector(), want), tolerance)
          << "rank " << r << " (" << CoordsToString(rp.coords) << ") " << name;
      ++compared;
    }
  }
  if (unheld.empty()) return compared;
  auto state = t.State();
  EXPECT_TRUE(state.ok()) << state.status();
  if (!state.ok()) return compared;
  for (const std::string& name : unheld) {
    auto it = state->parameters.find(name);
    const Tensor* full = serial.scope().Find(name);
    if (it == state->parameters.end() || full == nullptr) {
      ADD_FAILURE() << name << ": missing from the run's state or the serial scope";
      continue;
    }
    EXPECT_LT(WorstDifference(it->second.ToFloatVector(), full->ToFloatVector()), tolerance)
        << name << " (merged from the shards)";
    ++compared;
  }
  return compared;
}

// Every persistable var of every rank of `a` and `b` (parameters, the
// optimizer's moments, the learning rate and step counters), which ran the
// same plan but for the pass under test: bit for bit when `tolerance` is 0,
// else within it. The moments carry every step's gradient, so they catch a
// gradient AdamW's normalized update would hide. Returns the largest
// difference.
inline double ExpectSameState(ParallelTrainer& a, ParallelTrainer& b, double tolerance = 0) {
  EXPECT_EQ(a.local_ranks(), b.local_ranks());
  int compared = 0;
  double worst = 0;
  for (int r : a.local_ranks()) {
    std::set<std::string> persistable;
    for (const auto& [name, var] : a.plan().ranks[r].startup().global_block().vars()) {
      if (var.persistable()) persistable.insert(name);
    }
    for (const std::string& name : persistable) {
      const Tensor* x = a.rank_scope(r).FindLocal(name);
      const Tensor* y = b.rank_scope(r).FindLocal(name);
      EXPECT_EQ(x == nullptr, y == nullptr) << "rank " << r << " " << name;
      if (x == nullptr || y == nullptr || !x->initialized()) continue;
      if (tolerance == 0) {
        EXPECT_EQ(x->ToFloatVector(), y->ToFloatVector()) << "rank " << r << " " << name;
      } else {
        const double d = WorstDifference(x->ToFloatVector(), y->ToFloatVector());
        EXPECT_LT(d, tolerance) << "rank " << r << " " << name;
        worst = std::max(worst, d);
      }
      ++compared;
    }
  }
  EXPECT_GT(compared, 10);
  return worst;
}

}  // namespace loom

#endif  // LOOM_UNITTESTS_PARAMETER_COMPARE_H_
