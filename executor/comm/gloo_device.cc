#include "executor/comm/gloo_device.h"

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <exception>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>

#include "executor/comm/gloo_exchange.h"
#include "executor/comm/gloo_loop_thread.h"
#include "executor/cpu/host_threads.h"

namespace loom {
namespace {

void IgnoreSigpipeIfUnhandled() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current;
    if (sigaction(SIGPIPE, nullptr, &current) == 0 &&
        current.sa_handler == SIG_DFL) {
      signal(SIGPIPE, SIG_IGN);
    }
  });
}

// A device and its loop threads, which stop waiting for held mutexes when
// the device goes (a thread id can be reused).
struct DeviceWithLoop {
  std::shared_ptr<gloo::transport::Device> device;
  std::vector<pid_t> loop_threads;
  ~DeviceWithLoop() {
    device.reset();
    for (pid_t tid : loop_threads) UnregisterGlooLoopThread(tid);
  }
};

}  // namespace

// Gloo's TCP device starts one event-loop thread, which handles a pair's
// socket only if it gets the pair's mutex at once; otherwise it polls the
// socket again, which is still readable, and so spins. The rank's own
// threads take that mutex to post each send and receive. A loop thread
// that wakes on a message and preempts such a thread on its core therefore
// spins until the scheduler's next tick lets the holder finish: one call in
// ten took a tick, and the loop threads burnt half of the cores
// (docs/performance.md, "Gloo's event loop and the 4 ms stalls"). Under
// SCHED_BATCH a woken thread never preempts a running one (sched(7)), so
// the holder finishes first. The loop thread then runs when the threads of
// its core wait (for the messages it handles, mostly), or at the next tick
// where they compute: a call under compute can finish later than before.
// Where another thread (a kernel's) preempted the holder and the scheduler
// picks the loop thread next, the loop thread waits for the holder rather
// than spinning (gloo_loop_thread.h).
//
// The device is made while the calling thread runs under SCHED_BATCH and is
// named "gloo-loop", which the loop thread inherits; the new thread of that
// name is the one registered. Devices are made one at a time, so that each
// finds its own.
StatusOr<std::shared_ptr<gloo::transport::Device>> CreateGlooTcpDevice(
    const std::string& host) {
  IgnoreSigpipeIfUnhandled();
  gloo::transport::tcp::attr attr;
  attr.hostname = host;
  static std::mutex one_at_a_time;
  std::lock_guard<std::mutex> lock(one_at_a_time);
  const std::set<pid_t> before = ThreadsOfThisProcess();
  auto made = std::make_shared<DeviceWithLoop>();
  try {
    BatchPolicyForNewThreads loop_thread_policy;
    NameForNewThreads loop_thread_name(kGlooLoopThreadName);
    made->device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return Status(StatusCode::kUnavailable,
                  StrCat("cannot create a Gloo TCP device on '", host,
                         "': ", StripGlooLocation(e.what())));
  }
  for (pid_t tid : ThreadsOfThisProcess()) {
    if (before.count(tid) == 0 && ThreadName(tid) == kGlooLoopThreadName &&
        RegisterGlooLoopThread(tid)) {
      made->loop_threads.push_back(tid);
    }
  }
  gloo::transport::Device* device = made->device.get();
  return std::shared_ptr<gloo::transport::Device>(std::move(made), device);
}

int64_t GlooSendBufferBytes() {
  // Gloo's own cap on the buffer it asks for (tcp/pair.cc).
  constexpr int kGlooMaxSendBuffer = 32 << 20;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  int asked = kGlooMaxSendBuffer;
  int got = 0;
  socklen_t len = sizeof(got);
  const bool ok = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &asked, sizeof(asked)) == 0 &&
                  getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &got, &len) == 0;
  close(fd);
  // The kernel reports twice what it grants for data, its bookkeeping
  // included (socket(7)).
  return ok ? std::min<int64_t>(got / 2, kGlooMaxSendBuffer) : 0;
}

}  // namespace loom
