// Gloo's TCP device, one per rank: made so that its event-loop thread
// neither preempts the rank's threads nor spins for them; and how many
// bytes a Gloo send hands to its socket at once.
#ifndef LOOM_EXECUTOR_COMM_GLOO_DEVICE_H_
#define LOOM_EXECUTOR_COMM_GLOO_DEVICE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "framework/status.h"

namespace gloo::transport {
class Device;
}  // namespace gloo::transport

namespace loom {

// A Gloo TCP device on `host` (an address or name of this machine). One per
// rank: its event-loop thread ("gloo-loop") serves every group of the rank,
// runs under SCHED_BATCH, so that it never preempts a thread posting a
// message, and waits for a held pair mutex instead of spinning for it (see
// the .cc and gloo_loop_thread.h: Gloo's loop spins while such a thread is
// held off). Also makes the process ignore SIGPIPE if nobody handles it
// (Gloo writes to sockets with writev, so a peer that died would otherwise
// kill the writer).
StatusOr<std::shared_ptr<gloo::transport::Device>> CreateGlooTcpDevice(
    const std::string& host = "127.0.0.1");
inline constexpr char kGlooLoopThreadName[] = "gloo-loop";

// The most bytes a Gloo TCP send hands to its socket at once, and so
// returns without waiting for them to reach the receiver: Gloo sizes a
// pair's SO_SNDBUF to the message, up to 32 MiB, and the kernel caps that
// at net.core.wmem_max. Asked of a socket of this network namespace; 0
// where it cannot be.
int64_t GlooSendBufferBytes();

}  // namespace loom

#endif  // LOOM_EXECUTOR_COMM_GLOO_DEVICE_H_
