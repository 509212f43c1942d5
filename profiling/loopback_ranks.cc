#include "profiling/loopback_ranks.h"

#include <pthread.h>

#include <algorithm>
#include <mutex>
#include <thread>

#include <gloo/rendezvous/hash_store.h>

#include "executor/cpu/host_threads.h"

namespace loom {

Status RunRanks(int n, const std::function<Status(int)>& fn) {
  std::mutex mu;
  Status first;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Status s = fn(r);
      std::lock_guard<std::mutex> lock(mu);
      if (!s.ok() && first.ok()) first = s.WithContext(StrCat("rank ", r));
    });
  }
  for (auto& t : threads) t.join();
  return first;
}

StatusOr<LoopbackGroup> ConnectLoopback(int n, const std::string& job,
                                        std::chrono::milliseconds timeout,
                                        const std::vector<int>& cores) {
  if (n < 2) return InvalidArgument("need at least 2 ranks, got ", n);
  if (!cores.empty() && static_cast<int>(cores.size()) < n) {
    return InvalidArgument("pinning ", n, " ranks needs as many cores, got ", cores.size());
  }
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  std::vector<int> members(n);
  for (int r = 0; r < n; ++r) members[r] = r;
  const std::string name = GroupName(job, members);
  LoopbackGroup group(n);
  LOOM_RETURN_IF_ERROR(RunRanks(n, [&](int r) -> Status {
    if (!cores.empty()) PinThread(pthread_self(), cores[r]);
    LOOM_ASSIGN_OR_RETURN(auto device, CreateGlooTcpDevice());
    LOOM_ASSIGN_OR_RETURN(group[r], GlooCommunicator::Create(name, members, r, store.get(), job,
                                                             device, CommOptions{timeout}));
    return Status::OK();
  }));
  return group;
}

Tensor Floats(int64_t n, float value) {
  Tensor t(TensorMeta{proto::FP32, {n}});
  std::fill(t.data<float>(), t.data<float>() + n, value);
  return t;
}

}  // namespace loom
