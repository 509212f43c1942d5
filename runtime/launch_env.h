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
//   LOOM_RESTART     the job's start that these ranks are (0 at first,
//                    launch_generations.h), under loom launch
//                    --max_restarts; a restarted loom run resumes from its
//                    --save_dir, and meets under keys of its own
//   LOOM_NET_BURST_BYTES  under --net_rate: the bucket, in bytes, of the
//                    token-bucket shaper on each rank's link (its rate is
//                    what `loom profile --comm` measures)
//
// Without LOOM_RANK, a task of a Slurm step gets the same from Slurm's
// variables (slurm_env.h).
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
#include <vector>

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
inline constexpr char kRestartEnv[] = "LOOM_RESTART";

// Who started this rank process.
enum class Launcher { kLoomLaunch, kSlurm };

struct LaunchEnv {
  Launcher launcher = Launcher::kLoomLaunch;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int node_rank = 0;
  int nodes = 1;
  // The launch's directory (heartbeats, checkpoint hand-overs); empty
  // under Slurm, whose steps have none.
  std::string store_dir;
  std::string host = "127.0.0.1";
  // The shaper's bucket on each rank's link; 0: the link is not shaped.
  int64_t net_burst_bytes = 0;
  // The redis-server the ranks meet in; empty: the file store in store_dir
  // (which still holds the heartbeats and checkpoint hand-overs).
  std::string redis_endpoint;
  std::string job_id;
  // The job's start these ranks are: times it was restarted before.
  int restart = 0;
  // This rank starts the redis-server at redis_endpoint for the others
  // (rank 0 of a Slurm step), who wait for it to answer.
  bool starts_store = false;
};

// The launcher that started the ranks, for messages: "loom launch" or "srun".
const char* LauncherName(Launcher launcher);

// This machine's address on the route to HOST:PORT (the rendezvous store):
// the one peers on other machines reach it at, where HOST's name resolves
// to the machine's real address. No packet is sent.
StatusOr<std::string> LocalAddressTowards(const std::string& endpoint);

// How a launched rank's world named `world` meets its peers: the launch's
// store (redis or file), its address, and keys under "<job_id>/<world>"
// ("<job_id>-restart<N>/<world>" for the job's start N).
CommWorldOptions LaunchCommOptions(const LaunchEnv& env, const std::string& world);

// The launch environment of this process: loom launch's variables, else a
// Slurm step's; nullopt when neither started it; an error naming the
// variable when they are incomplete or malformed.
StatusOr<std::optional<LaunchEnv>> LaunchEnvFromEnvironment();

// `members` (ranks of `env`'s launch, ascending) as a launch of their own
// named `name`: this rank renumbered among them, the world their number,
// and keys under "<job_id>/<name>"; nullopt where this rank is not one of
// them.
std::optional<LaunchEnv> LaunchSubgroup(const LaunchEnv& env, const std::vector<int>& members,
                                        const std::string& name);

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
