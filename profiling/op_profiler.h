// Times ops on the CPU kernels, or a device's, one signature at a time, for
// the cost table (`loom profile`). Each op runs alone in a one-op program, through
// the serial executor (so dispatch and output allocation are part of its
// time, as when a plan runs), on random inputs that the kernel accepts:
// floats in [0.1, 1), ids and labels within their table or class count.
// Timing uses one OpenBLAS thread, as the rank executor gives each stream.
#ifndef LOOM_PROFILING_OP_PROFILER_H_
#define LOOM_PROFILING_OP_PROFILER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "framework/op_work.h"
#include "framework/program.h"

namespace loom {

class Device;

struct OpProfileOptions {
  // Untimed runs first: caches, page faults, OpenBLAS buffers.
  int warmup_runs = 2;
  // Timed samples; the median is taken over them.
  int samples = 7;
  // Each sample repeats the op back to back until it lasts at least this
  // long, so that microsecond ops are not timed at the clock's grain.
  double min_sample_seconds = 2e-4;
  // Ops whose tensors total more bytes than this are skipped (a full-size
  // preset's LM head does not fit a small host).
  int64_t max_bytes = int64_t{4} << 30;
  uint64_t seed = 1;
  // Where to time them; not owned. nullptr: the CPU kernels on the host.
  // On a device the inputs are placed there once, each sample ends when
  // the stream has finished its runs, and the time is the host's: launch
  // and allocation included, as when a plan runs.
  Device* device = nullptr;
};

struct OpTiming {
  std::string type;
  std::string signature;
  OpWork work;
  double median_seconds = 0;
  int samples = 0;
  int runs_per_sample = 0;
  // In steps: the bytes per run it read past the cache (ColdInputBytes);
  // -1: not recorded.
  double cold_input_bytes = -1;
};

// The first op of each distinct OpSignature over `blocks`, in order: the
// serial program's block, or every job program of a plan.
std::vector<const Op*> DistinctSignatureOps(const std::vector<const Block*>& blocks);

// Why `op` cannot be timed here, or "" when it can: it only communicates
// (the communication model prices it), has no kernel on the device, or is
// over max_bytes. An op that communicates and computes, and whose CPU kernel
// computes one shard (the vocabulary-parallel cross entropy), is timed as
// one shard: its compute without its reductions, which the communication
// model prices.
std::string UnprofilableReason(const Op& op, const OpProfileOptions& options);

// Times one op. Errors (a kernel rejecting its inputs) carry the op's
// location.
StatusOr<OpTiming> ProfileOp(const Op& op, const OpProfileOptions& options);

struct SkippedOp {
  std::string signature;
  std::string reason;
};
struct BlockProfile {
  std::vector<OpTiming> timed;
  std::vector<SkippedOp> skipped;
};
// Called before each distinct signature is timed: its 1-based position,
// the number of distinct signatures, the signature.
using ProfileProgressFn =
    std::function<void(int index, int total, const std::string& signature)>;

// Every op of `ops` (distinct signatures): timed, or skipped with its
// reason.
StatusOr<BlockProfile> ProfileOps(const std::vector<const Op*>& ops,
                                  const OpProfileOptions& options,
                                  const ProfileProgressFn& progress = nullptr);

}  // namespace loom

#endif  // LOOM_PROFILING_OP_PROFILER_H_
