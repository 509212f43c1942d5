#include "runtime/launch_env.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "runtime/slurm_env.h"

namespace loom {
namespace {

// A whole non-negative decimal number, or -1.
int ParseCount(const char* text) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 0 || value > (1 << 30)) return -1;
  return static_cast<int>(value);
}

}  // namespace

StatusOr<std::optional<LaunchEnv>> LaunchEnvFromEnvironment() {
  const char* rank = std::getenv(kRankEnv);
  if (rank == nullptr) return SlurmLaunchEnv([](const char* name) { return std::getenv(name); });
  const char* world = std::getenv(kWorldSizeEnv);
  const char* store = std::getenv(kStoreDirEnv);
  if (world == nullptr || store == nullptr) {
    return InvalidArgument(kRankEnv, " is set but ", kWorldSizeEnv, " or ", kStoreDirEnv,
                           " is not (start ranks with loom launch)");
  }
  LaunchEnv env;
  env.rank = ParseCount(rank);
  env.world_size = ParseCount(world);
  if (env.world_size < 1 || env.rank < 0 || env.rank >= env.world_size) {
    return InvalidArgument(kRankEnv, "='", rank, "' and ", kWorldSizeEnv, "='", world,
                           "' are not a rank and a world size");
  }
  env.store_dir = store;
  // Absent: one node, where the local rank is the rank.
  env.local_rank = env.rank;
  const char* local = std::getenv(kLocalRankEnv);
  const char* node = std::getenv(kNodeRankEnv);
  const char* nodes = std::getenv(kNodesEnv);
  if (local != nullptr || node != nullptr || nodes != nullptr) {
    env.local_rank = local == nullptr ? -1 : ParseCount(local);
    env.node_rank = node == nullptr ? -1 : ParseCount(node);
    env.nodes = nodes == nullptr ? -1 : ParseCount(nodes);
    if (env.local_rank < 0 || env.node_rank < 0 || env.nodes < 1 ||
        env.node_rank >= env.nodes || env.local_rank > env.rank) {
      return InvalidArgument(kLocalRankEnv, ", ", kNodeRankEnv, " and ", kNodesEnv,
                             " are not a local rank, a node and a node count (start ranks "
                             "with loom launch)");
    }
  }
  if (const char* host = std::getenv(kHostEnv)) {
    if (*host == '\0') return InvalidArgument(kHostEnv, " is set but empty");
    env.host = host;
  }
  if (const char* burst = std::getenv(kNetBurstEnv)) {
    const int value = ParseCount(burst);
    if (value <= 0) {
      return InvalidArgument(kNetBurstEnv, "='", burst, "' is not a positive byte count");
    }
    env.net_burst_bytes = value;
  }
  if (const char* endpoint = std::getenv(kRdzvEndpointEnv)) {
    if (*endpoint == '\0') return InvalidArgument(kRdzvEndpointEnv, " is set but empty");
    env.redis_endpoint = endpoint;
  }
  if (const char* job = std::getenv(kJobIdEnv)) env.job_id = job;
  if (const char* restart = std::getenv(kRestartEnv)) {
    env.restart = ParseCount(restart);
    if (env.restart < 0) {
      return InvalidArgument(kRestartEnv, "='", restart, "' is not a count of restarts");
    }
  }
  if (!env.redis_endpoint.empty() && env.job_id.empty()) {
    return InvalidArgument(kRdzvEndpointEnv, " is set but ", kJobIdEnv,
                           " is not: jobs that share a redis store need an id each");
  }
  return std::optional<LaunchEnv>(std::move(env));
}

const char* LauncherName(Launcher launcher) {
  return launcher == Launcher::kSlurm ? "srun" : "loom launch";
}

StatusOr<std::string> LocalAddressTowards(const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgument("'", endpoint, "' is not HOST:PORT");
  }
  const std::string host = endpoint.substr(0, colon);
  const std::string port = endpoint.substr(colon + 1);
  addrinfo hints = {};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return Status(StatusCode::kUnavailable,
                  StrCat("cannot resolve '", host, "': ", gai_strerror(rc)));
  }
  // A connected UDP socket takes the source address of its route.
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in local = {};
  socklen_t len = sizeof(local);
  const bool ok = fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
  freeaddrinfo(found);
  if (fd >= 0) close(fd);
  char text[INET_ADDRSTRLEN] = "";
  if (!ok || inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text)) == nullptr) {
    return Status(StatusCode::kUnavailable, StrCat("no route from this machine to ", endpoint));
  }
  return std::string(text);
}

CommWorldOptions LaunchCommOptions(const LaunchEnv& env, const std::string& world) {
  CommWorldOptions comm;
  comm.host = env.host;
  comm.file_store_dir = env.store_dir;
  comm.redis_endpoint = env.redis_endpoint;
  // Under Slurm, rank 0 starts the store as its peers start.
  if (env.launcher == Launcher::kSlurm) comm.redis_wait = std::chrono::seconds(60);
  // Each start of the job meets under keys of its own: a restart's ranks
  // never read what a failed start left in the store.
  std::string job = env.job_id;
  if (!job.empty() && env.restart > 0) job += StrCat("-restart", env.restart);
  comm.job = job.empty() ? world : job + "/" + world;
  return comm;
}

std::optional<LaunchEnv> LaunchSubgroup(const LaunchEnv& env, const std::vector<int>& members,
                                        const std::string& name) {
  const auto at = std::lower_bound(members.begin(), members.end(), env.rank);
  if (at == members.end() || *at != env.rank) return std::nullopt;
  LaunchEnv group = env;
  group.rank = static_cast<int>(at - members.begin());
  group.world_size = static_cast<int>(members.size());
  // Its members' nodes, as the launch numbers them: consecutive ranks.
  const int per_node = std::max(1, env.world_size / std::max(1, env.nodes));
  group.nodes = members.back() / per_node - members.front() / per_node + 1;
  group.node_rank = env.rank / per_node - members.front() / per_node;
  group.job_id = StrCat(env.job_id, "/", name);
  return group;
}

std::string HeartbeatPath(const std::string& store_dir, int rank) {
  return store_dir + "/heartbeat." + std::to_string(rank);
}

Heartbeat::Heartbeat(std::string path) : path_(std::move(path)) {
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    do {
      // Create it once, then renew its time: no write, no rename.
      const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      if (fd >= 0) {
        ::futimens(fd, nullptr);
        ::close(fd);
      }
    } while (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return done_; }));
  });
}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

StatusOr<std::unique_ptr<CommWorld>> LaunchWorld(const LaunchEnv& env, const std::string& job,
                                                 std::optional<std::chrono::milliseconds> timeout) {
  ParallelLayout layout;
  layout.dp = env.world_size;
  CommWorldOptions comm = LaunchCommOptions(env, job);
  if (timeout.has_value()) comm.timeout = *timeout;
  return CommWorld::Create(layout, env.rank, comm);
}

}  // namespace loom
