// A communicator for one group of ranks (an NCCL communicator's role): the
// collectives and point-to-point transfers the executor's communication ops
// run. Backends implement it (gloo_communicator.h; an NCCL one would sit
// beside it); CommWorld (comm_world.h) builds one per ring of a rank.
//
// Contract, whatever the backend:
//  - Group ranks are 0..size()-1; error messages name members by their
//    global rank, and the group by its name ("mp[0,1]": ring kind and the
//    global ranks in group-rank order).
//  - Collectives on one communicator are issued in the same order on every
//    member (as with NCCL). Point-to-point messages between two members are
//    matched first-in first-out per direction. Collectives and
//    point-to-point traffic may run concurrently from different threads.
//  - Reductions run in a fixed order: element i of the result is
//    (((x_0[i] op x_1[i]) op x_2[i]) ... op x_{n-1}[i]), group-rank order,
//    computed once and copied to every member. The result is therefore
//    bit-identical on every member, from run to run, and does not depend on
//    how tensors are bucketed.
//  - Every call is bounded by the communicator's timeout. A peer that does
//    not answer in time gives kDeadlineExceeded, a peer that died or closed
//    the group gives kUnavailable; either way the message names the group,
//    the operation and the peer. Never a crash, never a hang.
//  - After a failed call the communicator is broken: every later call fails
//    at once with kUnavailable and the first error.
#ifndef LOOM_EXECUTOR_COMM_COMMUNICATOR_H_
#define LOOM_EXECUTOR_COMM_COMMUNICATOR_H_

#include <chrono>
#include <string>
#include <vector>

#include "executor/tensor.h"
#include "framework/status.h"

namespace loom {

enum class ReduceOp { kSum, kAvg, kMax };

// "sum", "avg", "max"
const char* ReduceOpName(ReduceOp op);

class Communicator {
 public:
  virtual ~Communicator() = default;

  // This member's group rank, and the number of members.
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "mp[0,1]", for messages.
  virtual const std::string& name() const = 0;
  // The global rank of group rank `group_rank`.
  virtual int global_rank(int group_rank) const = 0;

  // Reduces every tensor of the bucket in place across the group. All
  // tensors have one floating dtype (fp32, fp64, bf16 or fp16) and the
  // same shapes on every member; kAvg divides the sum by size().
  virtual Status AllReduce(const std::vector<Tensor*>& tensors,
                           ReduceOp op) = 0;

  // out = the members' `in` concatenated along dim 0 in group-rank order.
  // `in` has rank >= 1 and the same meta on every member. If `out` already
  // has the expected meta it is written in place (it may be a view);
  // if it has no storage it is allocated; any other meta is an error.
  virtual Status AllGather(const Tensor& in, Tensor* out) = 0;

  // Reduces `in` across the group and gives member r the r-th of size()
  // equal parts of dim 0 (which size() must divide). `out` is handled as
  // in AllGather.
  virtual Status ReduceScatter(const Tensor& in, Tensor* out, ReduceOp op) = 0;

  // Copies `t` of group rank `root` into `t` of every other member; every
  // member's `t` already has the meta.
  virtual Status Broadcast(Tensor* t, int root) = 0;

  // Point-to-point to group rank `peer` (not this member). Send returns
  // once the peer has posted the matching Recv and the data has left this
  // member's buffer; Recv writes into `t`, whose meta the caller has set.
  // A send matches the peer's recv of the same position in the FIFO order
  // between the two; the byte counts must agree.
  virtual Status Send(const Tensor& t, int peer) = 0;
  virtual Status Recv(Tensor* t, int peer) = 0;
};

// Options shared by every communicator of a backend.
struct CommOptions {
  // Bounds group setup and each call, end to end.
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
};

// The group rank of `global_rank` among `members` (global ranks in group
// order), after checking what every backend's setup needs: members, none
// twice, `global_rank` among them, a positive timeout. InvalidArgument
// naming the group otherwise.
StatusOr<int> GroupRankOf(const std::string& name, const std::vector<int>& members,
                          int global_rank, const CommOptions& options);

// "2 s", "1500 ms": for messages.
std::string FormatTimeout(std::chrono::milliseconds timeout);

// "mp[0,1]"; a long member list is shortened to "dp[0,8,16,...,504] (64
// ranks)".
std::string GroupName(const std::string& kind, const std::vector<int>& members);

}  // namespace loom

#endif  // LOOM_EXECUTOR_COMM_COMMUNICATOR_H_
