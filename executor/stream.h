// Streams and events: how a device runs work in order and orders work
// across its queues. The executor owns one host thread per stream that
// issues the stream's instructions in order; a backend decides what issuing
// means. On CPU the issuing thread is the stream: work runs as it is issued
// (cpu/cpu_stream.h). On CUDA issuing enqueues a kernel on a cudaStream_t
// and returns (cuda/cuda_stream.h).
//
// A cross-stream dependency is an event: recorded on the producer's stream
// after the producer, waited on by the consumer's stream before the
// consumer. Events carry a generation (the training step), so one event per
// instruction serves every step without being reset.
#ifndef LOOM_EXECUTOR_STREAM_H_
#define LOOM_EXECUTOR_STREAM_H_

#include <atomic>
#include <cstdint>
#include <memory>
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

// A device's events, made together: event i is the host flag that its
// record was issued (on CPU, that the work before it is done), and where
// the backend has one of its own (a cudaEvent_t), that too, in its
// subclass. The flags are packed, 8 bytes each: a graph has thousands of
// events, and a handoff between streams reads and writes them.
class EventArray {
 public:
  EventArray(int n, WaitRoom* room) : flags_(new HostFlag[n]), size_(n), room_(room) {}
  virtual ~EventArray() = default;
  HostFlag& issued(int i) { return flags_[i]; }
  int size() const { return size_; }
  // Wakes every thread waiting on one of the device's events (on abort).
  void WakeAll() { room_->WakeAll(); }

 private:
  std::unique_ptr<HostFlag[]> flags_;
  int size_;
  WaitRoom* room_;
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

// The host side of recording and waiting is the same on every backend and
// inline here (on CPU it is all there is, and it sits on the path of every
// cross-stream dependency); a backend whose device orders work by itself
// adds that part (RecordOnDevice, WaitOnDevice).
class Stream {
 public:
  virtual ~Stream() = default;
  const StreamOptions& options() const { return options_; }

  // Called once, on the host thread that will issue this stream's work,
  // before it issues any (a CPU stream sets the thread's priority).
  virtual void OnIssuingThread() {}

  // Records event `i` of `events` (the device's) for `generation` after
  // the work issued so far.
  Status Record(EventArray& events, int i, int64_t generation) {
    if (on_device_) LOOM_RETURN_IF_ERROR(RecordOnDevice(events, i));
    events.issued(i).Raise(generation, *room_);
    return Status::OK();
  }
  // Work issued after this waits for `event`'s record of `generation`.
  // Returns false, having waited for nothing more, once `abort` is set.
  // The host thread blocks only until the record is issued; where the
  // device can wait by itself (CUDA), it does not wait for the work.
  StatusOr<bool> Wait(EventArray& events, int i, int64_t generation,
                      const std::atomic<bool>& abort) {
    HostFlag& issued = events.issued(i);
    if (!issued.IsRaised(generation) && !issued.Wait(generation, *room_, abort, yield_)) {
      return false;
    }
    if (on_device_) LOOM_RETURN_IF_ERROR(WaitOnDevice(events, i));
    return true;
  }
  // Blocks the host until every piece of work issued so far has finished.
  virtual Status Synchronize() = 0;
  // The backend's handle (a cudaStream_t), for its kernels; nullptr on CPU.
  virtual void* native_handle() const { return nullptr; }

 protected:
  // `room`: the device's, where waiters on its events sleep; `on_device`:
  // records and waits have a device part; `yield`: a waiter yields its
  // core before it sleeps (host_flag.h).
  Stream(StreamOptions options, WaitRoom* room, bool on_device, bool yield)
      : options_(std::move(options)), room_(room), on_device_(on_device), yield_(yield) {}
  virtual Status RecordOnDevice(EventArray& events, int i) { return Status::OK(); }
  virtual Status WaitOnDevice(EventArray& events, int i) { return Status::OK(); }

 private:
  StreamOptions options_;
  WaitRoom* room_;
  bool on_device_;
  bool yield_;
};

}  // namespace loom

#endif  // LOOM_EXECUTOR_STREAM_H_
