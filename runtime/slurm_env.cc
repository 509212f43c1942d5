#include "runtime/slurm_env.h"

#include <cstdlib>

namespace loom {
namespace {

// A whole non-negative decimal number, or -1.
int64_t ParseId(const char* text) {
  if (text == nullptr || *text == '\0') return -1;
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (*end != '\0' || value < 0 || value > (int64_t{1} << 40)) return -1;
  return value;
}

}  // namespace

StatusOr<std::string> FirstHostOfSlurmNodeList(std::string_view list) {
  std::string host;
  int depth = 0;
  // Inside brackets, only the first number of the range list is kept.
  bool kept_in_bracket = false;
  for (char c : list) {
    if (c == ',' && depth == 0) break;
    if (c == '[') {
      if (++depth > 1) break;
      kept_in_bracket = false;
      continue;
    }
    if (c == ']') {
      if (--depth < 0) break;
      continue;
    }
    if (depth == 1) {
      if (c == ',' || c == '-') kept_in_bracket = true;
      if (!kept_in_bracket) host += c;
      continue;
    }
    host += c;
  }
  if (depth != 0 || host.empty()) {
    return InvalidArgument("Slurm node list '", list, "' is not a hostlist");
  }
  return host;
}

int SlurmStorePort(int64_t job_id, int64_t step_id) {
  return 20000 + static_cast<int>((job_id * 16 + step_id) % 20000);
}

StatusOr<std::optional<LaunchEnv>> SlurmLaunchEnv(const GetEnv& get_env) {
  const char* step = get_env("SLURM_STEP_ID");
  const char* procid = get_env("SLURM_PROCID");
  if (step == nullptr || procid == nullptr) return std::optional<LaunchEnv>();
  auto number = [&](const char* name, int64_t* out) -> Status {
    const char* text = get_env(name);
    *out = ParseId(text);
    if (*out < 0) {
      return InvalidArgument("in a Slurm step (SLURM_STEP_ID is set), ", name,
                             text == nullptr ? " is unset" : StrCat("='", text, "'"),
                             text == nullptr ? "" : " is not a whole number");
    }
    return Status::OK();
  };
  int64_t rank, world, local, node, nodes, job_id, step_id;
  LOOM_RETURN_IF_ERROR(number("SLURM_STEP_NUM_TASKS", &world));
  if (world <= 1) return std::optional<LaunchEnv>();
  LOOM_RETURN_IF_ERROR(number("SLURM_PROCID", &rank));
  LOOM_RETURN_IF_ERROR(number("SLURM_LOCALID", &local));
  LOOM_RETURN_IF_ERROR(number("SLURM_NODEID", &node));
  LOOM_RETURN_IF_ERROR(number("SLURM_STEP_NUM_NODES", &nodes));
  LOOM_RETURN_IF_ERROR(number("SLURM_JOB_ID", &job_id));
  LOOM_RETURN_IF_ERROR(number("SLURM_STEP_ID", &step_id));
  if (world > (1 << 20) || rank >= world || nodes < 1 || node >= nodes || local > rank) {
    return InvalidArgument("Slurm step: SLURM_PROCID=", rank, " SLURM_LOCALID=", local,
                           " SLURM_NODEID=", node, " of SLURM_STEP_NUM_TASKS=", world,
                           " SLURM_STEP_NUM_NODES=", nodes, " do not describe a task");
  }
  const char* node_list = get_env("SLURM_STEP_NODELIST");
  if (node_list == nullptr) {
    return InvalidArgument("in a Slurm step (SLURM_STEP_ID is set), SLURM_STEP_NODELIST is unset");
  }
  LOOM_ASSIGN_OR_RETURN(std::string first_host, FirstHostOfSlurmNodeList(node_list));

  LaunchEnv env;
  env.launcher = Launcher::kSlurm;
  env.rank = static_cast<int>(rank);
  env.world_size = static_cast<int>(world);
  env.local_rank = static_cast<int>(local);
  env.node_rank = static_cast<int>(node);
  env.nodes = static_cast<int>(nodes);
  env.job_id = StrCat("slurm-", job_id, ".", step_id);
  if (const char* endpoint = get_env(kRdzvEndpointEnv); endpoint != nullptr && *endpoint) {
    env.redis_endpoint = endpoint;
  } else {
    // On one node, loopback: the node's name may stand for an address
    // (Debian's 127.0.1.1) that the server, on loopback, does not hear.
    const std::string host = env.nodes == 1 ? "127.0.0.1" : first_host;
    env.redis_endpoint = StrCat(host, ":", SlurmStorePort(job_id, step_id));
    env.starts_store = env.rank == 0;
  }
  if (const char* host = get_env(kHostEnv); host != nullptr && *host) {
    env.host = host;
  } else if (env.nodes > 1) {
    LOOM_ASSIGN_OR_RETURN(env.host, LocalAddressTowards(env.redis_endpoint));
  }
  return std::optional<LaunchEnv>(std::move(env));
}

StatusOr<std::unique_ptr<RedisServer>> StartSlurmStepStore(const LaunchEnv& env) {
  RedisServerOptions options;
  options.bind = env.nodes > 1 ? "0.0.0.0" : "127.0.0.1";
  const size_t colon = env.redis_endpoint.rfind(':');
  options.port = std::atoi(env.redis_endpoint.c_str() + colon + 1);
  StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start(options);
  if (!server.ok()) {
    return server.status().WithContext(StrCat("rank 0 of Slurm step ", env.job_id,
                                              " starting the ranks' store (", kRdzvEndpointEnv,
                                              " names one of your own instead)"));
  }
  return server;
}

}  // namespace loom
