#include "executor/core_wait_profiler.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>
#include <thread>

#include <gloo/rendezvous/hash_store.h>

#include "executor/comm/gloo_communicator.h"
#include "executor/cpu/host_threads.h"
#include "executor/tensor.h"

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Computes on the calling thread's core in bursts of `burst` seconds with a
// short sleep between them, until `stop`.
void Burst(double burst, const std::atomic<bool>& stop) {
  volatile double x = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    const auto start = Clock::now();
    while ((std::isinf(burst) || Since(start) < burst) && !stop.load(std::memory_order_relaxed)) {
      for (int k = 0; k < 1000; ++k) x = x + 1e-9 * k;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

}  // namespace

StatusOr<std::vector<CoreWaitTiming>> MeasureCoreWait(const CoreWaitOptions& o) {
  const std::vector<int> cores = CoresOfThisProcess();
  if (o.ranks < 2 || static_cast<int>(cores.size()) < o.ranks) {
    return FailedPrecondition("the core-wait measurement needs ", std::max(2, o.ranks),
                              " ranks on cores of their own; this process may use ",
                              cores.size(), " core(s)");
  }
  if (o.bursts.empty() || o.calls < 1 || o.bytes < 4) {
    return InvalidArgument("the core-wait measurement needs bursts, calls and bytes");
  }
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  std::vector<int> members(o.ranks);
  for (int r = 0; r < o.ranks; ++r) members[r] = r;
  const std::string name = GroupName("core-wait", members);
  std::vector<std::vector<double>> medians(o.ranks);
  std::mutex mu;
  Status first;
  std::vector<std::thread> threads;
  for (int r = 0; r < o.ranks; ++r) {
    threads.emplace_back([&, r] {
      Status s = [&]() -> Status {
        // Pinned before the device exists, so that Gloo's event-loop thread
        // keeps to this core too, as a training rank's does.
        PinThread(pthread_self(), cores[r]);
        LOOM_ASSIGN_OR_RETURN(auto device, CreateGlooTcpDevice());
        LOOM_ASSIGN_OR_RETURN(auto comm, GlooCommunicator::Create(name, members, r, store.get(),
                                                                  "core-wait", device,
                                                                  CommOptions{o.timeout}));
        Tensor buf(TensorMeta{proto::FP32, {o.bytes / 4}});
        std::fill(buf.data<float>(), buf.data<float>() + o.bytes / 4, 1.0f);
        Tensor line_up(TensorMeta{proto::FP32, {1}});
        for (int i = 0; i < 3; ++i) LOOM_RETURN_IF_ERROR(comm->AllReduce({&buf}, ReduceOp::kAvg));
        for (double burst : o.bursts) {
          std::atomic<bool> stop{false};
          std::thread beside([&] {
            PinThread(pthread_self(), cores[r]);
            Burst(burst, stop);
          });
          std::vector<double> times;
          Status calls;
          for (int i = 0; i < o.calls && calls.ok(); ++i) {
            // A pause, so that the call starts at any point of a burst;
            // then the parties line up, and the call is timed.
            std::this_thread::sleep_for(std::chrono::microseconds(500));
            line_up.data<float>()[0] = 0;
            calls = comm->AllReduce({&line_up}, ReduceOp::kMax);
            if (!calls.ok()) break;
            const auto start = Clock::now();
            calls = comm->AllReduce({&buf}, ReduceOp::kAvg);
            times.push_back(Since(start));
          }
          stop = true;
          beside.join();
          LOOM_RETURN_IF_ERROR(calls);
          std::sort(times.begin(), times.end());
          medians[r].push_back(times[times.size() / 2]);
        }
        return Status::OK();
      }();
      std::lock_guard<std::mutex> lock(mu);
      if (!s.ok() && first.ok()) first = s.WithContext(StrCat("core-wait rank ", r));
    });
  }
  for (auto& t : threads) t.join();
  LOOM_RETURN_IF_ERROR(first);
  std::vector<CoreWaitTiming> out;
  for (size_t i = 0; i < o.bursts.size(); ++i) out.push_back({o.bursts[i], medians[0][i]});
  return out;
}

}  // namespace loom
