// One NCCL communicator and the CUDA stream its operations run on: the
// building block of NcclCommunicator (nccl_communicator.h), which has one
// for its group's collectives and one per directed pair for send/recv.
//
// Everything here is bounded by a deadline: the communicator is created
// non-blocking (ncclConfig_t::blocking = 0) and its setup polled, and a
// wait for issued work polls cudaStreamQuery and ncclCommGetAsyncError
// instead of blocking in CUDA, so that a peer that never comes fails the
// wait with a message instead of hanging it. A lane whose wait failed has
// been aborted (ncclCommAbort) and is of no further use.
#ifndef LOOM_EXECUTOR_COMM_NCCL_LANE_H_
#define LOOM_EXECUTOR_COMM_NCCL_LANE_H_

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "framework/status.h"

namespace gloo {
namespace rendezvous {
class Store;
}  // namespace rendezvous
}  // namespace gloo

namespace loom {

// Sets NCCL_ALGO=Ring and NCCL_PROTO=Simple in the environment unless the
// user set them. NCCL reads them once, at its first communicator or unique
// id, so this must run before that (NcclCommunicator::Create calls it).
void PinNcclAlgorithm();

// OK if this process sees CUDA device `cuda_device`; Unavailable "no CUDA
// device (<the runtime's reason>)" where it sees none, InvalidArgument
// where the ordinal is out of range.
Status CheckCudaDevice(int cuda_device);

// "64 bytes", "12.5 KB", "1.2 MB", "3.0 GB": for messages.
std::string FormatBytes(int64_t bytes);

// Where and how to join one NCCL communicator.
struct NcclLaneSpec {
  std::string group;         // "dp[0,1]", for messages
  std::string what;          // "setup", "setup of send to rank 7", ...
  std::vector<int> members;  // global ranks, in lane-rank order
  int rank = 0;              // this member's lane rank
  // The unique id is kept under "<key>/id", each member's arrival under
  // "<key>/joined/<lane rank>"; `store` may be null for a lane of one.
  gloo::rendezvous::Store* store = nullptr;
  std::string key;
  int cuda_device = 0;
  int stream_priority = 0;  // CUDA's: lower is more urgent
  std::chrono::milliseconds timeout{60000};
};

class NcclLane {
 public:
  using Clock = std::chrono::steady_clock;

  // Collective over spec.members: lane rank 0 makes the unique id and sets
  // it in the store, the others wait for it, then all create the
  // communicator. kDeadlineExceeded naming the members that did not arrive
  // within spec.timeout (the store says who), kUnavailable on NCCL or CUDA
  // errors, AlreadyExists where the store has the keys from an earlier world.
  static StatusOr<std::unique_ptr<NcclLane>> Join(const NcclLaneSpec& spec);
  // Finalizes and destroys the communicator (aborts it where that does not
  // finish within the timeout, or after a failure).
  ~NcclLane();

  ncclComm_t comm() const { return comm_; }
  cudaStream_t stream() const { return stream_; }

  // Makes the lane's device current on the calling thread; every call that
  // issues work on the lane starts with it.
  Status Activate(const std::string& what) const;
  // OK for ncclSuccess and ncclInProgress (a non-blocking communicator's
  // "issued, still being enqueued"); otherwise the error, and the lane is
  // aborted.
  Status CheckIssued(ncclResult_t result, const std::string& what);
  // Returns once everything issued on the lane is done. Past `deadline`
  // aborts the communicator and gives kDeadlineExceeded "<what> timed out
  // after <timeout><waiting>; its NCCL communicator was aborted"; an
  // asynchronous NCCL error gives kUnavailable with NCCL's text.
  Status Wait(const std::string& what, const std::string& waiting,
              Clock::time_point deadline);

 private:
  NcclLane(std::string group, int cuda_device,
           std::chrono::milliseconds timeout)
      : group_(std::move(group)),
        cuda_device_(cuda_device),
        timeout_(timeout) {}
  // ncclCommGetAsyncError as a Status: OK once idle, kUnavailable for an
  // error; sets *pending while NCCL is still enqueueing or initializing.
  Status AsyncState(const std::string& what, bool* pending);
  void Abort();

  const std::string group_;
  const int cuda_device_;
  const std::chrono::milliseconds timeout_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  bool failed_ = false;
};

}  // namespace loom

#endif  // LOOM_EXECUTOR_COMM_NCCL_LANE_H_
