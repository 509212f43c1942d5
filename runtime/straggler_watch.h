// Names a rank whose steps are consistently slower than its peers'. In
// synchronous training every rank's step lasts as long as the slowest's,
// so step times cannot tell the straggler; each rank's own kernel time
// (RankExecutor::last_compute_seconds) can. Ranks are compared with the
// peers that do the same work: the ranks of their pipeline stage.
#ifndef LOOM_RUNTIME_STRAGGLER_WATCH_H_
#define LOOM_RUNTIME_STRAGGLER_WATCH_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "executor/comm/communicator.h"
#include "framework/status.h"

namespace loom {

class ParallelTrainer;

struct StragglerOptions {
  // Steps per comparison of medians.
  int window_steps = 20;
  // A rank is slower when its median exceeds its peers' by this factor...
  double ratio = 1.25;
  // ...in this many windows in a row.
  int windows = 2;
};

class StragglerWatch {
 public:
  // `peer_group[r]`: rank r's peers are the ranks of the same group.
  StragglerWatch(std::vector<int> peer_group, StragglerOptions options);

  // Each rank's median kernel seconds per step over steps first..last (one
  // window); returns a line for each rank now slower than its peers for
  // `windows` windows in a row (once, until it keeps up again).
  std::vector<std::string> AddWindow(int64_t first_step, int64_t last_step,
                                     const std::vector<double>& median_seconds);

 private:
  std::vector<int> peer_group_;
  StragglerOptions options_;
  // Windows in a row each rank has been slower than its peers.
  std::vector<int> slow_windows_;
  // The first step of each rank's run of slow windows.
  std::vector<int64_t> first_slow_step_;
};

// A trainer's StragglerWatch: after each step it keeps the kernel time of
// each rank this process runs; after each window, the medians of every
// rank meet (over `all_ranks`, a group of the whole world, when the ranks
// are processes) and the process of rank 0 reports any straggler.
class StragglerTracker {
 public:
  // `all_ranks`: null when this process runs every rank.
  StragglerTracker(const ParallelTrainer& trainer, Communicator* all_ranks,
                   StragglerOptions options, std::function<void(const std::string&)> report);

  // After step `step` of the trainer.
  Status AfterStep(int64_t step);

 private:
  const ParallelTrainer& trainer_;
  Communicator* all_ranks_;
  StragglerOptions options_;
  std::function<void(const std::string&)> report_;
  StragglerWatch watch_;
  // This window's kernel seconds, per local rank.
  std::vector<std::vector<double>> window_;
  int64_t window_first_step_ = -1;
};

}  // namespace loom

#endif  // LOOM_RUNTIME_STRAGGLER_WATCH_H_
