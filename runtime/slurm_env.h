// A rank of a Slurm job step: `srun -N2 -n4 loom run ...` needs no other
// flag. Each task learns its place from the variables srun sets:
//
//   SLURM_PROCID          its rank
//   SLURM_STEP_NUM_TASKS  the world size
//   SLURM_LOCALID         its place among its node's tasks
//   SLURM_NODEID          its node, of SLURM_STEP_NUM_NODES
//   SLURM_STEP_NODELIST   the step's nodes, in Slurm's hostlist syntax
//   SLURM_JOB_ID, SLURM_STEP_ID  which step, naming its keys in the store
//
// The ranks meet in a redis-server on the first node of the step's node
// list, which rank 0 (always placed there) starts for the length of its
// run, on a port made from the job and step ids. LOOM_RDZV_ENDPOINT names
// a redis-server of the user's own instead; LOOM_HOST overrides the
// address a rank's sockets bind to (else the one that routes to the
// first node; loopback on one node). A step of one task is not a launch:
// it runs its ranks in one process, as `loom run` does by hand.
#ifndef LOOM_RUNTIME_SLURM_ENV_H_
#define LOOM_RUNTIME_SLURM_ENV_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "framework/status.h"
#include "runtime/launch_env.h"
#include "runtime/redis_server.h"

namespace loom {

// Reads a variable of the environment; nullptr when unset.
using GetEnv = std::function<const char*(const char*)>;

// The launch environment of a task of a Slurm step; nullopt outside a step
// (SLURM_STEP_ID or SLURM_PROCID unset) or in a step of one task; an error
// naming the variable when one is missing or malformed.
StatusOr<std::optional<LaunchEnv>> SlurmLaunchEnv(const GetEnv& get_env);

// The first host of a Slurm hostlist: "node[07-09,12],gpu3" is "node07",
// "rack[2-3]-n[1-4]" is "rack2-n1". An error for an empty or unbalanced list.
StatusOr<std::string> FirstHostOfSlurmNodeList(std::string_view list);

// The port of a step's own redis-server, 20000 to 39999, from its job and
// step ids: two steps running at once on one first node differ unless
// their ids are 20000 apart.
int SlurmStorePort(int64_t job_id, int64_t step_id);

// The redis-server that rank 0 of a Slurm step starts for its peers
// (env.starts_store): on every address when the step spans nodes, else on
// loopback.
StatusOr<std::unique_ptr<RedisServer>> StartSlurmStepStore(const LaunchEnv& env);

}  // namespace loom

#endif  // LOOM_RUNTIME_SLURM_ENV_H_
