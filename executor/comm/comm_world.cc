#include "executor/comm/comm_world.h"

#include <sys/time.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

#include <gloo/common/error.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/hash_store.h>
#define HIREDIS_NESTED_INCLUDE  // Debian's hiredis headers sit in hiredis/
#include <gloo/rendezvous/redis_store.h>
#include <gloo/transport/device.h>

#include "executor/comm/gloo_communicator.h"
#ifdef LOOM_WITH_CUDA
#include "executor/comm/nccl_communicator.h"
#endif

namespace loom {

std::shared_ptr<gloo::rendezvous::Store> InProcessStore(
    const std::string& job) {
  static std::mutex mu;
  static auto* stores =
      new std::map<std::string, std::shared_ptr<gloo::rendezvous::Store>>();
  std::lock_guard<std::mutex> lock(mu);
  auto& store = (*stores)[job];
  if (store == nullptr) store = std::make_shared<gloo::rendezvous::HashStore>();
  return store;
}

StatusOr<std::shared_ptr<gloo::rendezvous::Store>> ConnectRedisStore(
    const std::string& endpoint, std::chrono::milliseconds wait) {
  const size_t colon = endpoint.rfind(':');
  char* end = nullptr;
  const long port =
      colon == std::string::npos ? 0 : std::strtol(endpoint.c_str() + colon + 1, &end, 10);
  if (colon == std::string::npos || colon == 0 || end == endpoint.c_str() + colon + 1 ||
      *end != '\0' || port < 1 || port > 65535) {
    return InvalidArgument("redis store endpoint '", endpoint, "' is not HOST:PORT");
  }
  const std::string host = endpoint.substr(0, colon);
  // RedisStore's own connect waits as long as TCP does for a host that
  // does not answer; a bounded probe first names the endpoint in seconds.
  const auto deadline = std::chrono::steady_clock::now() + wait;
  const timeval probe_timeout{5, 0};
  redisContext* probe = nullptr;
  while (true) {
    probe = redisConnectWithTimeout(host.c_str(), static_cast<int>(port), probe_timeout);
    if (probe != nullptr && probe->err == 0) break;
    const std::string why = probe == nullptr ? "out of memory" : probe->errstr;
    if (probe != nullptr) redisFree(probe);
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status(StatusCode::kUnavailable,
                    StrCat("cannot reach the redis store at ", endpoint, ": ", why,
                           wait.count() > 0 ? StrCat(" (waited ", wait.count(), " ms)") : ""));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  redisFree(probe);
  try {
    return std::shared_ptr<gloo::rendezvous::Store>(
        std::make_shared<gloo::rendezvous::RedisStore>(host, static_cast<int>(port)));
  } catch (const std::exception& e) {
    return Status(StatusCode::kUnavailable,
                  StrCat("cannot reach the redis store at ", endpoint, ": ", e.what()));
  }
}

StatusOr<std::unique_ptr<CommWorld>> CommWorld::Create(
    const ParallelLayout& layout, int rank, const CommWorldOptions& options) {
  if (layout.dp < 1 || layout.mp < 1 || layout.pp < 1) {
    return InvalidArgument("comm world: layout dp=", layout.dp,
                           " mp=", layout.mp, " pp=", layout.pp,
                           " has a degree below 1");
  }
  if (rank < 0 || rank >= layout.world_size()) {
    return InvalidArgument("comm world: rank ", rank, " is outside 0..",
                           layout.world_size() - 1);
  }
  std::unique_ptr<CommWorld> world(new CommWorld(layout, rank));
  const std::string where = StrCat("comm world, rank ", rank, " (",
                                   CoordsToString(layout.Coords(rank)), ")");
  const bool nccl = options.backend == CommBackend::kNccl;
#ifdef LOOM_WITH_CUDA
  // Before any store or socket: a machine without a device fails at once,
  // in one line, instead of in NCCL.
  if (nccl) {
    LOOM_RETURN_IF_ERROR(CheckCudaDevice(options.cuda_device).WithContext(
        StrCat(where, ", NCCL backend")));
  }
#else
  if (nccl) {
    return Unimplemented(where, ": this build has no NCCL (LOOM_CUDA=OFF, or "
                         "configure found no CUDA)");
  }
#endif

  if (layout.world_size() > 1) {
    if (options.store != nullptr) {
      world->store_ = options.store;
    } else if (!options.redis_endpoint.empty()) {
      auto redis = ConnectRedisStore(options.redis_endpoint, options.redis_wait);
      if (!redis.ok()) return redis.status().WithContext(where);
      world->store_ = *std::move(redis);
    } else if (!options.file_store_dir.empty()) {
      try {
        world->store_ = std::make_shared<gloo::rendezvous::FileStore>(
            options.file_store_dir);
      } catch (const std::exception& e) {
        return Status(StatusCode::kUnavailable,
                      StrCat(where, ": cannot open the file store at '",
                             options.file_store_dir, "': ", e.what()));
      }
    } else {
      world->store_ = InProcessStore(options.job);
    }
    if (!nccl) {
      auto device = CreateGlooTcpDevice(options.host);
      if (!device.ok()) return device.status().WithContext(where);
      world->device_ = *device;
    }
  }

  CommOptions comm_options;
  comm_options.timeout = options.timeout;
  // The fixed order every rank follows (see the header).
  for (RingId ring : kAllRings) {
    std::vector<int> members = RingMembers(layout, rank, ring);
    if (members.empty()) continue;
    const std::string name = GroupName(RingName(ring), members);
    const std::string key_prefix = StrCat(options.job, "/", name);
    if (nccl) {
#ifdef LOOM_WITH_CUDA
      auto priority = options.nccl_stream_priority.find(ring);
      auto comm = NcclCommunicator::Create(
          name, members, rank, world->store_, key_prefix, options.cuda_device,
          priority == options.nccl_stream_priority.end() ? 0 : priority->second,
          comm_options);
      if (!comm.ok()) return comm.status().WithContext(where);
      world->comms_[Index(ring)] = std::move(comm).value();
#endif
      continue;
    }
    auto comm = GlooCommunicator::Create(name, members, rank,
                                         world->store_.get(), key_prefix,
                                         world->device_, comm_options);
    if (!comm.ok()) return comm.status().WithContext(where);
    world->comms_[Index(ring)] = std::move(comm).value();
  }
  return world;
}

CommWorld::~CommWorld() = default;

StatusOr<Communicator*> CommWorld::Get(RingId ring) const {
  const int i = Index(ring);
  if (i < 0 || i >= kNumRings) {
    return InvalidArgument("comm world, rank ", rank_, ": unknown ring_id ",
                           static_cast<int>(ring));
  }
  if (comms_[i] == nullptr) {
    const RankCoords c = layout_.Coords(rank_);
    return NotFound(
        "comm world, rank ", rank_, " (", CoordsToString(c), "): no ",
        RingName(ring), " ring",
        ring == kSharedParamRing
            ? (layout_.pp == 1 ? ": pp=1, nothing is shared across stages"
                               : ": only the first and last stage have one")
            : "");
  }
  return comms_[i].get();
}

}  // namespace loom
