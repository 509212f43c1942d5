// The Gloo communicator: CPU collectives and send/recv over Gloo's TCP
// transport (loopback by default), with group setup through a Gloo
// rendezvous store.
//
// Everything goes over Gloo's unbound-buffer send/recv; none of Gloo's
// collective algorithms is used, for three reasons: the reduction order
// (Gloo's ring all-reduce is deterministic, but the order in which an element
// is summed depends on which ring chunk it falls in, so it changes with the
// bucket size; ours is group-rank order for every element); error messages
// that name the peer (a wait is always on one known peer); and byte counts
// that a mismatched peer cannot violate (the slot scheme in
// gloo_exchange.h).
//
// Algorithms (n members, a message of B bytes; direct exchanges, one message
// per pair and phase, all posted before any is waited):
//  - AllReduce, B bytes per member: reduce-scatter then all-gather. The
//    bucket is cut into n chunks of B/n (the first B%n elements' worth one
//    element longer). Phase 1: every member sends chunk q to member q and
//    receives its own chunk from everyone, then folds the n copies in
//    group-rank order. Phase 2: every member sends its reduced chunk to
//    everyone. Per member: 2 (n-1) messages, 2 (n-1)/n B bytes out and in
//    (as the ring algorithm), 2 latency steps (the ring takes 2 (n-1)),
//    scratch B bytes (and B more to pack a bucket that is not one flat
//    buffer).
//  - ReduceScatter: phase 1 alone, on equal parts of dim 0.
//  - AllGather: phase 2 alone: (n-1) messages and (n-1) B bytes out and in.
//  - Broadcast: the root sends to everyone: (n-1) B bytes out of the root.
//  - Send/Recv: one message; Send waits until the peer's Recv is posted
//    (Gloo's TCP transport moves data only to a posted receive).
//
// Slots, and how a failed call cleans up: gloo_exchange.h.
//
// Timeouts and failures: every call has one deadline (now + timeout) for
// all its waits. A Gloo-level timeout closes every connection of the group
// (Gloo's behaviour), so peers and concurrent calls learn of it at once. A
// failed call drains its other messages (gloo_exchange.h), then marks the
// communicator broken. Calls already running on other threads are not
// interrupted; they finish or fail within their own deadline.
//
// Thread safety: collectives are serialized by a mutex (their order must
// still agree across members); Send and Recv may run concurrently with each
// other and with a collective.
#ifndef LOOM_EXECUTOR_COMM_GLOO_COMMUNICATOR_H_
#define LOOM_EXECUTOR_COMM_GLOO_COMMUNICATOR_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "executor/comm/communicator.h"
#include "executor/comm/gloo_device.h"
#include "executor/comm/gloo_exchange.h"

namespace gloo {
class Context;
namespace transport {
class Device;
}  // namespace transport
namespace rendezvous {
class Store;
}  // namespace rendezvous
}  // namespace gloo

namespace loom {

class GlooCommunicator final : public Communicator {
 public:
  // Joins the group `members` (global ranks, in group-rank order) as global
  // rank `global_rank`; collective over the members. Through a
  // gloo::rendezvous::PrefixStore over `store`, every member publishes its
  // addresses under "<key_prefix>/<group rank>" and reads everyone else's,
  // then connects to each (a full mesh). `key_prefix` must be unique among
  // the groups sharing `store`. A member that does not join within
  // options.timeout gives kDeadlineExceeded naming it. A group of one needs
  // neither store nor device, and its operations are local.
  static StatusOr<std::unique_ptr<GlooCommunicator>> Create(
      const std::string& name, const std::vector<int>& members, int global_rank,
      gloo::rendezvous::Store* store, const std::string& key_prefix,
      const std::shared_ptr<gloo::transport::Device>& device,
      const CommOptions& options);
  ~GlooCommunicator() override;

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
  GlooCommunicator(std::string name, std::vector<int> members, int rank,
                   std::shared_ptr<gloo::Context> context,
                   const CommOptions& options);

  // The messages of one call of `op`, failing it by `deadline`.
  GlooExchange Exchange(const char* op);
  GlooExchange Exchange(const char* op,
                        std::chrono::steady_clock::time_point deadline);
  // Returns once every member has connected (see the .cc).
  Status SetupBarrier(std::chrono::steady_clock::time_point deadline);
  // OK, or the earlier error that broke this communicator.
  Status CheckUsable(const char* op) const;
  void MarkBroken(const Status& status);
  // Errors that name this group and operation.
  Status Invalid(const char* op, const std::string& what) const;
  Status CheckPeer(const char* op, int peer) const;
  // Gives `out` the meta `expected`: kept if it has it, allocated if it has
  // no storage, an error otherwise.
  Status PrepareOut(const char* op, const TensorMeta& expected,
                    Tensor* out) const;

  template <typename T>
  Status RunAllReduce(T* data, int64_t numel, ReduceOp op, uint64_t seq);
  // Phase 1: member q's part of `in` is counts[q] elements at offsets[q];
  // reduces this member's part across the group, in group-rank order, into
  // `out` (which may overlap `in`).
  template <typename T>
  Status ReduceChunk(GlooExchange& call, const T* in,
                     const std::vector<int64_t>& offsets,
                     const std::vector<int64_t>& counts, T* out, ReduceOp op,
                     SlotKind slot_kind, uint64_t seq);
  // Phase 2: every member's part is in place at base + byte_offsets[q] on
  // that member; copies each into place on every other.
  Status GatherChunks(GlooExchange& call, uint8_t* base,
                      const std::vector<int64_t>& byte_offsets,
                      const std::vector<int64_t>& byte_counts,
                      SlotKind slot_kind, uint64_t seq);

  const std::string name_;
  const std::vector<int> members_;
  const int rank_;
  const CommOptions options_;
  std::shared_ptr<gloo::Context> context_;  // null for a group of one

  // Collectives: their sequence number and reused buffers.
  std::mutex collective_mu_;
  uint64_t collective_seq_ = 0;
  std::vector<uint8_t> pack_;     // a non-contiguous bucket, packed
  std::vector<uint8_t> scratch_;  // received chunks and the accumulator

  // Point-to-point sequence numbers, per peer and direction.
  std::mutex p2p_mu_;
  std::vector<uint64_t> send_seq_, recv_seq_;

  std::atomic<bool> broken_{false};
  mutable std::mutex error_mu_;
  Status first_error_;
};

}  // namespace loom

#endif  // LOOM_EXECUTOR_COMM_GLOO_COMMUNICATOR_H_
