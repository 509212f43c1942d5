// The CPU backend's streams and events. A CPU stream is the host thread
// that issues its work: each piece runs as it is issued, so a recorded
// event is a raised completion flag and a wait blocks the thread until the
// flag is up.
//
// Priorities become nice values: a stream below the rank's highest runs
// its thread at `low_priority_nice` (raising nice needs no privilege), so
// that a woken communication thread takes a core from computation at once
// instead of at the next tick; a stream at the highest priority blocks
// rather than yields while it waits, or it would win the core back at every
// yield and starve the others. A device may keep its streams' threads to
// one core (CpuDeviceOptions::core).
#ifndef LOOM_EXECUTOR_CPU_CPU_STREAM_H_
#define LOOM_EXECUTOR_CPU_CPU_STREAM_H_

#include "executor/stream.h"

namespace loom {

class CpuStream : public Stream {
 public:
  // `nice`: the issuing thread's nice value (0: unchanged); `outranks`:
  // this stream ranks above another of the rank.
  // `core`: the core the issuing thread keeps to (-1: any).
  // `room`: the device's, where its events' waiters sleep.
  CpuStream(StreamOptions options, int nice, bool outranks, int core, WaitRoom* room)
      : Stream(std::move(options), room, /*on_device=*/false, /*yield=*/!outranks),
        nice_(nice),
        outranks_(outranks),
        core_(core) {}

  void OnIssuingThread() override;
  // Work issued on a CPU stream is done when issuing returns.
  Status Synchronize() override { return Status::OK(); }

  int nice() const { return nice_; }
  bool outranks() const { return outranks_; }
  int core() const { return core_; }

 private:
  int nice_;
  bool outranks_;
  int core_;
};

}  // namespace loom

#endif  // LOOM_EXECUTOR_CPU_CPU_STREAM_H_
