#include "executor/comm/nccl_lane.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include <gloo/common/error.h>
#include <gloo/rendezvous/store.h>

#include "executor/comm/communicator.h"
#include "executor/cuda/cuda_probe.h"
#include "executor/cuda/cuda_status.h"

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;

// Polls back off from a few microseconds (a short collective should not
// pay a sleep) to 200 us (a long one should not burn a core).
class Backoff {
 public:
  void Pause() {
    std::this_thread::sleep_for(pause_);
    pause_ = std::min(pause_ * 2, microseconds(200));
  }

 private:
  microseconds pause_{2};
};

std::string NcclText(ncclResult_t result, ncclComm_t comm) {
  std::string text = ncclGetErrorString(result);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && last[0] != '\0') text = StrCat(text, ": ", last);
  return text;
}

// True once `key` is in the store, false if it is not by `deadline`.
bool WaitForKey(gloo::rendezvous::Store* store, const std::string& key,
                Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
  try {
    store->wait({key}, std::max(left, milliseconds(1)));
    return true;
  } catch (const gloo::IoException&) {
    return false;
  }
}

std::string RankList(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) {
    s += StrCat(i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ", ranks[i]);
  }
  return StrCat(ranks.size() == 1 ? "rank " : "ranks ", s);
}

}  // namespace

void PinNcclAlgorithm() {
  // NCCL's default picks algorithm and protocol per message size and
  // topology (tree, ring, LL, LL128), which changes how an element is
  // summed; pinned, the same call sums the same way on every run.
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  setenv("NCCL_ALGO", "Ring", /*overwrite=*/0);
  setenv("NCCL_PROTO", "Simple", /*overwrite=*/0);
}

Status CheckCudaDevice(int cuda_device) {
  const CudaProbe probe = ProbeCuda();
  if (probe.devices == 0) {
    return Status(StatusCode::kUnavailable,
                  StrCat("no CUDA device (", probe.why_none, ")"));
  }
  if (cuda_device < 0 || cuda_device >= probe.devices) {
    return InvalidArgument("CUDA device ", cuda_device,
                           " does not exist (this process sees ", probe.devices,
                           ")");
  }
  return Status::OK();
}

std::string FormatBytes(int64_t bytes) {
  if (bytes < 1024) return StrCat(bytes, " bytes");
  const char* units[] = {"KB", "MB", "GB", "TB"};
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", v, units[u]);
  return buf;
}

StatusOr<std::unique_ptr<NcclLane>> NcclLane::Join(const NcclLaneSpec& spec) {
  const std::string where = StrCat(spec.what, " on group ", spec.group);
  const int n = static_cast<int>(spec.members.size());
  if (n < 1 || spec.rank < 0 || spec.rank >= n) {
    return InvalidArgument(where, ": lane rank ", spec.rank, " of ", n);
  }
  if (n > 1 && spec.store == nullptr) {
    return InvalidArgument(where, ": a group of ", n, " needs a store");
  }
  LOOM_RETURN_IF_ERROR(
      CheckCudaDevice(spec.cuda_device).WithContext(StrCat(where, " (NCCL)")));
  PinNcclAlgorithm();
  const Clock::time_point deadline = Clock::now() + spec.timeout;
  const std::string id_key = StrCat(spec.key, "/id");

  // The unique id: made by lane rank 0, read by the others from the store.
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  try {
    if (spec.rank == 0) {
      const ncclResult_t r = ncclGetUniqueId(&id);
      if (r != ncclSuccess) {
        return Status(StatusCode::kUnavailable,
                      StrCat(where, ": ncclGetUniqueId: ", NcclText(r, nullptr)));
      }
      if (n > 1) {
        const char* p = reinterpret_cast<const char*>(&id);
        spec.store->set(id_key, std::vector<char>(p, p + sizeof(id)));
      }
    } else {
      if (!WaitForKey(spec.store, id_key, deadline)) {
        return Status(StatusCode::kDeadlineExceeded,
                      StrCat(where, ": timed out after ",
                             FormatTimeout(spec.timeout), " waiting for rank ",
                             spec.members[0], " to publish the NCCL id (store key '",
                             id_key, "')"));
      }
      const std::vector<char> bytes = spec.store->get(id_key);
      if (bytes.size() != sizeof(id)) {
        return Internal(where, ": store key '", id_key, "' holds ", bytes.size(),
                        " bytes, not an NCCL id of ", sizeof(id));
      }
      std::memcpy(&id, bytes.data(), sizeof(id));
    }
    // Only so that a setup that times out can name who never arrived.
    if (n > 1) spec.store->set(StrCat(spec.key, "/joined/", spec.rank), {'1'});
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    if (msg.find("already") != std::string::npos) {
      return AlreadyExists(where, ": the store already holds '", spec.key,
                           "' (a world used this store with the same job "
                           "name; give each world a fresh job or store): ",
                           msg);
    }
    return Status(StatusCode::kUnavailable,
                  StrCat(where, ": the rendezvous store failed: ", msg));
  }

  std::unique_ptr<NcclLane> lane(
      new NcclLane(spec.group, spec.cuda_device, spec.timeout));
  LOOM_RETURN_IF_ERROR(lane->Activate(where));
  LOOM_CUDA_RETURN_IF_ERROR(
      cudaStreamCreateWithPriority(&lane->stream_, cudaStreamNonBlocking,
                                   spec.stream_priority),
      StrCat(where, ": creating its stream"));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = spec.group.c_str();  // in NCCL's own logs
  const ncclResult_t r =
      ncclCommInitRankConfig(&lane->comm_, n, id, spec.rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    lane->Abort();
    return Status(StatusCode::kUnavailable,
                  StrCat(where, ": ncclCommInitRankConfig: ", NcclText(r, nullptr)));
  }
  Backoff backoff;
  for (;;) {
    bool pending = false;
    Status s = lane->AsyncState(where, &pending);
    if (!s.ok()) {
      lane->Abort();
      return s;
    }
    if (!pending) return lane;
    if (Clock::now() >= deadline) break;
    backoff.Pause();
  }
  lane->Abort();
  std::vector<int> missing;
  for (int q = 0; q < n; ++q) {
    if (q == spec.rank) continue;
    if (!WaitForKey(spec.store, StrCat(spec.key, "/joined/", q),
                    Clock::now())) {
      missing.push_back(spec.members[q]);
    }
  }
  return Status(
      StatusCode::kDeadlineExceeded,
      StrCat(where, ": timed out after ", FormatTimeout(spec.timeout),
             missing.empty()
                 ? " while NCCL connected the members (every member "
                   "arrived; a member's NCCL setup or the network between "
                   "them is stuck)"
                 : StrCat(" waiting for ", RankList(missing), " to join")));
}

NcclLane::~NcclLane() {
  if (cudaSetDevice(cuda_device_) != cudaSuccess) cudaGetLastError();
  if (comm_ != nullptr) {
    // Every call waited for its work, so finalizing has nothing to flush
    // and should end at once; bounded all the same, with an abort after.
    bool clean = false;
    if (!failed_) {
      const ncclResult_t r = ncclCommFinalize(comm_);
      const Clock::time_point deadline = Clock::now() + timeout_;
      Backoff backoff;
      while (r == ncclSuccess || r == ncclInProgress) {
        ncclResult_t state = ncclSuccess;
        if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) break;
        if (state == ncclSuccess) {
          clean = true;
          break;
        }
        if (state != ncclInProgress || Clock::now() >= deadline) break;
        backoff.Pause();
      }
    }
    if (clean) {
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
    comm_ = nullptr;
  }
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

Status NcclLane::Activate(const std::string& what) const {
  return CudaStatus(cudaSetDevice(cuda_device_),
                    StrCat(what, ": selecting CUDA device ", cuda_device_));
}

Status NcclLane::CheckIssued(ncclResult_t result, const std::string& what) {
  if (result == ncclSuccess || result == ncclInProgress) return Status::OK();
  const std::string text = NcclText(result, comm_);
  Abort();
  const StatusCode code = result == ncclInvalidArgument || result == ncclInvalidUsage
                              ? StatusCode::kInvalidArgument
                              : StatusCode::kUnavailable;
  return Status(code, StrCat(what, ": NCCL refused it: ", text));
}

Status NcclLane::AsyncState(const std::string& what, bool* pending) {
  *pending = false;
  ncclResult_t state = ncclSuccess;
  const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
  if (r != ncclSuccess) state = r;
  if (state == ncclInProgress) {
    *pending = true;
    return Status::OK();
  }
  if (state == ncclSuccess) return Status::OK();
  return Status(StatusCode::kUnavailable,
                StrCat(what, ": NCCL failed (a member exited, or the network "
                             "between them failed): ",
                       NcclText(state, comm_)));
}

Status NcclLane::Wait(const std::string& what, const std::string& waiting,
                      Clock::time_point deadline) {
  if (failed_ || comm_ == nullptr) {
    return Internal(what, ": the NCCL communicator of ", group_, " was aborted");
  }
  Backoff backoff;
  for (;;) {
    bool pending = false;
    Status s = AsyncState(what, &pending);
    if (!s.ok()) {
      Abort();
      return s;
    }
    // Until NCCL has enqueued everything (no longer pending), an idle
    // stream proves nothing.
    if (!pending) {
      const cudaError_t e = cudaStreamQuery(stream_);
      if (e == cudaSuccess) return Status::OK();
      if (e != cudaErrorNotReady) {
        Abort();
        return CudaStatus(e, StrCat(what, ": its stream failed"));
      }
    }
    if (Clock::now() >= deadline) break;
    backoff.Pause();
  }
  Abort();
  return Status(StatusCode::kDeadlineExceeded,
                StrCat(what, " timed out after ", FormatTimeout(timeout_),
                       waiting, "; its NCCL communicator was aborted"));
}

void NcclLane::Abort() {
  failed_ = true;
  if (comm_ != nullptr) {
    // Also ends the kernels still waiting for peers.
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }
}

}  // namespace loom
