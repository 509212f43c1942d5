// One rank's communicators, one per ring of the dp x mp x pp layout.
//
// Groups are RingMembers (scheduler/layout.h). A ring of one rank is a
// valid communicator whose operations are local.
//
// Backends: Gloo (CPU tensors, TCP) or NCCL (device tensors on
// `cuda_device`; nccl_communicator.h), built in the same order through the
// same store; NCCL keeps its ids under "J/G/nccl/...".
//
// Setup apart from execution: Create() makes every connection (one Gloo TCP
// device per rank, one full mesh per group); calls only communicate. Group
// creation is collective, so every rank creates its groups in one fixed
// order (mp, dp, pp, shared): a rank waits only for members of the group it
// is joining, and every member reaches that group once it is done with the
// ones before, so setup cannot deadlock. A member missing for longer than
// the timeout fails setup with a message naming it.
//
// Rendezvous keys: group G of job J keeps member r's pair addresses under
// "J/G/r" and (Gloo 0.5 of 2022) its host name under "J/G/rank_r", e.g.
// "loom/mp[0,1]/1"; G is the group's name (RingName and global ranks), and
// gloo::rendezvous::PrefixStore adds the "J/G/". The store is the caller's,
// or Gloo's RedisStore on a redis-server every process of the job reaches
// (launches across machines), or a FileStore on a directory shared by the
// processes of the job, or by default an in-process HashStore shared by
// every rank (thread) of this process that names the same job.
#ifndef LOOM_EXECUTOR_COMM_COMM_WORLD_H_
#define LOOM_EXECUTOR_COMM_COMM_WORLD_H_

#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "executor/comm/communicator.h"
#include "scheduler/layout.h"

namespace gloo {
namespace transport {
class Device;
}  // namespace transport
namespace rendezvous {
class Store;
}  // namespace rendezvous
}  // namespace gloo

namespace loom {

enum class CommBackend { kGloo, kNccl };

struct CommWorldOptions {
  // Bounds setup and every call.
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
  // The address the ranks' sockets bind to.
  std::string host = "127.0.0.1";
  // Namespace of this world's keys in the store. Stores refuse to set a key
  // twice, so two worlds that share a store need different jobs.
  std::string job = "loom";
  // Where ranks meet, first match wins:
  //  - `store` if set (shared by the ranks that use it);
  //  - a gloo::rendezvous::RedisStore on `redis_endpoint` ("HOST:PORT") if
  //    non-empty: a redis-server that outlives jobs, whose keys `job`
  //    keeps apart;
  //  - a gloo::rendezvous::FileStore on `file_store_dir` if non-empty: one
  //    directory, fresh for each launch (or a fresh job), seen by every
  //    process of the job (for `loom launch`);
  //  - else the in-process HashStore of `job` (InProcessStore).
  std::shared_ptr<gloo::rendezvous::Store> store;
  std::string redis_endpoint;
  // How long a redis-server that does not answer yet is waited for: under
  // Slurm the step's rank 0 starts it while the others connect. 0: once.
  std::chrono::milliseconds redis_wait{0};
  std::string file_store_dir;
  // kNccl needs a build with CUDA (LOOM_WITH_CUDA) and a device: this
  // rank's is `cuda_device`. Each ring's NCCL stream gets its CUDA priority
  // from `nccl_stream_priority` (lower is more urgent; 0 if absent).
  CommBackend backend = CommBackend::kGloo;
  int cuda_device = 0;
  std::map<RingId, int> nccl_stream_priority;
};

// The HashStore of `job` in this process, created on first use and kept for
// the life of the process. Every rank thread that names the same job meets
// in it; a world rebuilt in the same process needs a new job name.
std::shared_ptr<gloo::rendezvous::Store> InProcessStore(const std::string& job);

// Gloo's RedisStore on "HOST:PORT"; Unavailable naming the endpoint when no
// redis-server answers there within `wait` (tried every 100 ms; 0: once),
// InvalidArgument for a malformed endpoint.
StatusOr<std::shared_ptr<gloo::rendezvous::Store>> ConnectRedisStore(
    const std::string& endpoint, std::chrono::milliseconds wait = std::chrono::milliseconds(0));

class CommWorld {
 public:
  // Collective over all ranks of the layout: each calls it with its rank.
  static StatusOr<std::unique_ptr<CommWorld>> Create(
      const ParallelLayout& layout, int rank, const CommWorldOptions& options);
  ~CommWorld();

  // The communicator of `ring`; NotFound if this rank has no such ring.
  StatusOr<Communicator*> Get(RingId ring) const;

  int rank() const { return rank_; }
  const ParallelLayout& layout() const { return layout_; }

 private:
  CommWorld(const ParallelLayout& layout, int rank)
      : layout_(layout), rank_(rank) {}

  static constexpr int kNumRings = kNumRingIds - 1;
  static int Index(RingId ring) { return static_cast<int>(ring) - 1; }

  ParallelLayout layout_;
  int rank_;
  std::shared_ptr<gloo::rendezvous::Store> store_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::array<std::unique_ptr<Communicator>, kNumRings> comms_;
};

}  // namespace loom

#endif  // LOOM_EXECUTOR_COMM_COMM_WORLD_H_
