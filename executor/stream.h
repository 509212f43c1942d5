// Streams and events: how a device runs work in order and orders work
// across its queues. The executor owns one host thread per stream that
// issues the stream's instructions in order; a backend decides what issuing
// means. On CPU the issuing thread is the stream: work runs as it is issued
// (cpu/cpu_stream.h). On CUDA issuing enqueues a kernel on a cudaStream_t
// and returns (cuda/cuda_stream.h).
//
// A cross-stream dependency is an Event: recorded on the producer's stream
// after the producer, waited on by the consumer's stream before the
// consumer. Events carry a generation (the training step), so one event per
// instruction serves every step without being reset.
#ifndef LOOM_EXECUTOR_STREAM_H_
#define LOOM_EXECUTOR_STREAM_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "executor/host_flag.h"
#include "framework/status.h"

namespace loom {

// Where a kernel runs.
enum class DeviceType { kCpu, kCuda };
// "cpu", "cuda".
const char* DeviceTypeName(DeviceType type);
// From "cpu" or "cuda"; InvalidArgument naming the flag otherwise.
StatusOr<DeviceType> ParseDeviceType(const std::string& name);

class Event {
 public:
  virtual ~Event() = default;
  // Raised by the recording stream's issuing thread once the record for a
  // generation is issued: on CPU, once the work before it is done.
  HostFlag& issued() { return issued_; }

 private:
  HostFlag issued_;
};

struct StreamOptions {
  std::string name;  // the plan's stream type: "calc", "mp", "sharding" ...
  // Loom's priority (higher runs first where streams compete), and the
  // highest and lowest over the rank's streams, which a backend maps onto
  // what it has: CUDA's stream priority range, or nice values on CPU.
  int priority = 0;
  int highest = 0;
  int lowest = 0;
};

class Stream {
 public:
  virtual ~Stream() = default;
  virtual const StreamOptions& options() const = 0;

  // Called once, on the host thread that will issue this stream's work,
  // before it issues any (a CPU stream sets the thread's priority).
  virtual void OnIssuingThread() {}

  // Records `event` for `generation` after the work issued so far.
  virtual Status Record(Event* event, int64_t generation) = 0;
  // Work issued after this waits for `event`'s record of `generation`.
  // Returns false, having waited for nothing more, once `abort` is set.
  // The host thread blocks only until the record is issued; where the
  // device can wait by itself (CUDA), it does not wait for the work.
  virtual StatusOr<bool> Wait(Event* event, int64_t generation,
                              const std::atomic<bool>& abort) = 0;
  // Blocks the host until every piece of work issued so far has finished.
  virtual Status Synchronize() = 0;
  // The backend's handle (a cudaStream_t), for its kernels; nullptr on CPU.
  virtual void* native_handle() const { return nullptr; }
};

}  // namespace loom

#endif  // LOOM_EXECUTOR_STREAM_H_
