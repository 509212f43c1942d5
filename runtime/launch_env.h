// The environment `loom launch` gives each rank process, in one place for
// the launcher that sets it and the commands that read it.
//
//   LOOM_RANK        this process's rank, 0..LOOM_WORLD_SIZE-1
//   LOOM_WORLD_SIZE  processes started, on every node
//   LOOM_LOCAL_RANK  its place among its node's processes
//   LOOM_NODE_RANK   its node, 0..LOOM_NNODES-1 (nodes hold consecutive ranks)
//   LOOM_NNODES      nodes of the job
//   LOOM_STORE_DIR   a fresh directory where the ranks meet (file store)
//   LOOM_HOST        the address this rank's sockets bind to; set under
//                    --net_rate (the rank's address in its own network
//                    namespace), else unset and loopback is used
//   LOOM_RDZV_ENDPOINT  HOST:PORT of a redis-server the ranks meet in
//                    (--rdzv_backend redis), instead of the file store
//   LOOM_JOB_ID      the launch's id, prefixing every key it puts in the
//                    store, so that jobs sharing one never collide
//   LOOM_NET_BURST_BYTES  under --net_rate: the bucket, in bytes, of the
//                    token-bucket shaper on each rank's link (its rate is
//                    what `loom profile --comm` measures)
#ifndef LOOM_RUNTIME_LAUNCH_ENV_H_
#define LOOM_RUNTIME_LAUNCH_ENV_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <memory>
#include <optional>
#include <string>

#include "executor/comm/comm_world.h"
#include "framework/status.h"

namespace loom {

inline constexpr char kRankEnv[] = "LOOM_RANK";
inline constexpr char kWorldSizeEnv[] = "LOOM_WORLD_SIZE";
inline constexpr char kStoreDirEnv[] = "LOOM_STORE_DIR";
inline constexpr char kHostEnv[] = "LOOM_HOST";
inline constexpr char kNetBurstEnv[] = "LOOM_NET_BURST_BYTES";
inline constexpr char kLocalRankEnv[] = "LOOM_LOCAL_RANK";
inline constexpr char kNodeRankEnv[] = "LOOM_NODE_RANK";
inline constexpr char kNodesEnv[] = "LOOM_NNODES";
inline constexpr char kRdzvEndpointEnv[] = "LOOM_RDZV_ENDPOINT";
inline constexpr char kJobIdEnv[] = "LOOM_JOB_ID";

struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int node_rank = 0;
  int nodes = 1;
  std::string store_dir;
  std::string host = "127.0.0.1";
  // The shaper's bucket on each rank's link; 0: the link is not shaped.
  int64_t net_burst_bytes = 0;
  // The redis-server the ranks meet in; empty: the file store in store_dir
  // (which still holds the heartbeats and checkpoint hand-overs).
  std::string redis_endpoint;
  std::string job_id;
};

// How a launched rank's world named `world` meets its peers: the launch's
// store (redis or file), its address, and keys under "<job_id>/<world>".
CommWorldOptions LaunchCommOptions(const LaunchEnv& env, const std::string& world);

// The launch environment of this process; nullopt when LOOM_RANK is unset
// (not started by loom launch); an error naming the variable when it is
// incomplete or malformed.
StatusOr<std::optional<LaunchEnv>> LaunchEnvFromEnvironment();

// Where rank `rank`'s liveness shows: a file in the launch's store whose
// modification time a launched loom command renews every second.
std::string HeartbeatPath(const std::string& store_dir, int rank);

// While alive, renews this process's heartbeat file every second from a
// thread of its own, so that a rank stopped or frozen as a whole is told
// from one that waits: `loom launch --heartbeat_timeout` stops the run and
// names it. A thread, not the step loop: a rank waiting minutes for a slow
// peer is alive.
class Heartbeat {
 public:
  explicit Heartbeat(std::string path);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  std::string path_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// Every rank of the launch as one group: the communicator worlds of a
// layout with dp = the world size, meeting through the launch's store as
// `job` (a distinct name per world a process makes). Its dp ring is them all.
StatusOr<std::unique_ptr<CommWorld>> LaunchWorld(const LaunchEnv& env, const std::string& job,
                                                 std::optional<std::chrono::milliseconds>
                                                     timeout = std::nullopt);

}  // namespace loom

#endif  // LOOM_RUNTIME_LAUNCH_ENV_H_
