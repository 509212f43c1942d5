// The NCCL communicator: collectives and send/recv of device tensors over
// NCCL, host-synchronous like the Gloo one (gloo_communicator.h), so that the
// executor drives both the same way.
//
// Each call issues its NCCL operations on a CUDA stream of the
// communicator's own (created at the priority given, the ring's) and
// returns once they are done, polling the stream and NCCL's asynchronous
// error instead of blocking in CUDA (nccl_lane.h). The call does not order
// itself after other streams: the caller must have finished (synchronized)
// the work that produced its tensors, and may use the results as soon as
// it returns.
//
// Tensors: device memory (Tensor::device_type() == kCuda) on the
// communicator's device, every one initialized. Each call makes that
// device current on the calling thread (cudaSetDevice) and leaves it so. NCCL cannot allocate
// through the executor's Device, so unlike Gloo, AllGather and
// ReduceScatter need `out` already sized on the device (FailedPrecondition
// otherwise).
//
// Reduction order, a deviation from communicator.h: NCCL sums around its
// ring, not in group-rank order, and kAvg is NCCL's ncclAvg. Results are
// identical on every member and from run to run only with the algorithm
// pinned: PinNcclAlgorithm() (nccl_lane.h) sets NCCL_ALGO=Ring and
// NCCL_PROTO=Simple unless the user set them, before the first
// communicator. Even then they differ from Gloo's in the last bits, and an
// element's order depends on the tensor's size and the ring's layout, not
// only on group ranks.
//
// Point-to-point: a communicator is not safe for concurrent calls from two
// threads, and one stream carrying both directions deadlocks under a send
// that waits for its receiver. So Send and Recv use separate communicators
// of two members, one per directed pair (src -> dst) of group ranks, each
// on its own stream, made on the first Send (by the sender) and the first
// Recv (by the receiver) between the two, which meet there by design.
// Sends on one pair are matched FIFO, as the contract says; a byte count
// that differs between sender and receiver is not detected by NCCL (the
// call may time out).
//
// Failures: every call is bounded by the timeout; past it the NCCL
// communicator is aborted and the call gives kDeadlineExceeded ("dp[0,1]:
// all_reduce of 4 tensors (1.2 MB) timed out after 60 s"; send/recv name
// the peer). NCCL's asynchronous errors give kUnavailable with NCCL's
// text. After either, the whole communicator is broken: every later call
// fails at once with the first error.
//
// Thread safety: collectives are serialized by a mutex (their order must
// still agree across members). Sends to one peer, and receives from one
// peer, are serialized per direction; other calls run concurrently, each
// on its own NCCL communicator and stream.
//
// Not checked without GPUs: NCCL kernels of different communicators on one
// device run concurrently only while the device has room for them all; a
// pair communicator set up while a collective waits for a slow peer has not
// been seen to deadlock, nor exercised.
#ifndef LOOM_EXECUTOR_COMM_NCCL_COMMUNICATOR_H_
#define LOOM_EXECUTOR_COMM_NCCL_COMMUNICATOR_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "executor/comm/communicator.h"
#include "executor/comm/nccl_lane.h"

namespace loom {

class NcclCommunicator final : public Communicator {
 public:
  // Joins the group `members` (global ranks, in group-rank order) as global
  // rank `global_rank` on CUDA device `cuda_device`; collective over the
  // members. Group rank 0 sets the NCCL id in `store` under
  // "<key_prefix>/nccl/id" (pairs: "<key_prefix>/nccl/p2p_<src>_to_<dst>")
  // and the others wait for it, all within options.timeout; `key_prefix`
  // must be unique among the groups sharing `store`, which a group of one
  // does not need. Unavailable "no CUDA device (...)" where there is none;
  // kDeadlineExceeded naming the members that did not join.
  static StatusOr<std::unique_ptr<NcclCommunicator>> Create(
      const std::string& name, const std::vector<int>& members, int global_rank,
      std::shared_ptr<gloo::rendezvous::Store> store,
      const std::string& key_prefix, int cuda_device, int stream_priority,
      const CommOptions& options);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  const std::string& name() const override { return name_; }
  int global_rank(int group_rank) const override {
    return members_.at(group_rank);
  }

  Status AllReduce(const std::vector<Tensor*>& tensors, ReduceOp op) override;
  Status AllGather(const Tensor& in, Tensor* out) override;
  Status ReduceScatter(const Tensor& in, Tensor* out, ReduceOp op) override;
  Status Broadcast(Tensor* t, int root) override;
  Status Send(const Tensor& t, int peer) override;
  Status Recv(Tensor* t, int peer) override;

 private:
  // One direction between this member and a peer: its lane, made on first
  // use, and the mutex that keeps it to one call at a time.
  struct Direction {
    std::mutex mu;
    std::unique_ptr<NcclLane> lane;
  };

  NcclCommunicator(std::string name, std::vector<int> members, int rank,
                   std::shared_ptr<gloo::rendezvous::Store> store,
                   std::string key_prefix, int cuda_device,
                   int stream_priority, const CommOptions& options);

  // The lane of `d` (sending to `peer` if `sending`, else receiving from
  // it), joined on first use; `d->mu` is held.
  StatusOr<NcclLane*> PairLane(Direction* d, int peer, bool sending);
  // Runs a collective's `issue` on the group lane and waits for it.
  template <typename IssueFn>
  Status RunCollective(const std::string& what, IssueFn issue);
  // Waits for `lane`'s work; a failure breaks this communicator.
  Status Finish(NcclLane* lane, const std::string& what,
                const std::string& waiting,
                std::chrono::steady_clock::time_point deadline);
  // OK, or the earlier error that broke this communicator.
  Status CheckUsable(const char* op) const;
  Status Broken(const Status& status);
  Status Invalid(const char* op, const std::string& what) const;
  Status CheckPeer(const char* op, int peer) const;
  // A tensor NCCL can use: on CUDA, initialized.
  Status CheckOnDevice(const char* op, const char* which,
                       const Tensor& t) const;
  // `out` must already have `expected` on the device (see the header).
  Status CheckOut(const char* op, const TensorMeta& expected,
                  const Tensor* out) const;

  const std::string name_;
  const std::vector<int> members_;
  const int rank_;
  const std::shared_ptr<gloo::rendezvous::Store> store_;
  const std::string key_prefix_;
  const int cuda_device_;
  const int stream_priority_;
  const CommOptions options_;

  std::mutex collective_mu_;
  std::unique_ptr<NcclLane> group_lane_;
  // Per peer (group rank); this member's own entries stay unused.
  std::vector<std::unique_ptr<Direction>> sends_, recvs_;

  std::atomic<bool> broken_{false};
  mutable std::mutex error_mu_;
  Status first_error_;
};

}  // namespace loom

#endif  // LOOM_EXECUTOR_COMM_NCCL_COMMUNICATOR_H_
