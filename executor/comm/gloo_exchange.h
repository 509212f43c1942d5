// The messages of one communicator call over a Gloo context: each posted on
// its own unbound buffer, each waited once, all within one deadline, every
// failure turned into a Status that names the group, the operation and the
// peer's global rank. GlooCommunicator builds its algorithms on it.
//
// Slots (Gloo's tag space, 64 bits, matched per pair and direction, FIFO
// within a slot):
//   bits 63..56  SlotKind; Gloo's own collectives use 0x01-0x08
//   bits 55..32  sequence number mod 2^24: the communicator's collective
//                count, or for point-to-point the count of messages so far
//                from sender to receiver
//   bits 31..0   the message's byte count mod 2^32
// Two members that disagree on a message's size (or on which collective
// comes next) therefore never match: they time out with messages naming
// each other, rather than overrunning a buffer inside Gloo's event loop.
//
// Failures: an error while posting surfaces when that message is waited,
// so a dead peer is reported in the same order as a slow one. The first
// failed wait drains the call: it waits (within the deadline, ignoring
// errors) for every other message still in flight, so that the transport
// never refers to memory the call no longer owns and live peers get what
// they were sent; then it reports the failure once.
#ifndef LOOM_EXECUTOR_COMM_GLOO_EXCHANGE_H_
#define LOOM_EXECUTOR_COMM_GLOO_EXCHANGE_H_

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "framework/status.h"

namespace gloo {
class Context;
namespace transport {
class UnboundBuffer;
}  // namespace transport
}  // namespace gloo

namespace loom {

enum class SlotKind : uint8_t {
  kAllReduceScatter = 0xC1,  // all-reduce, phase 1
  kAllReduceGather = 0xC2,   // all-reduce, phase 2
  kAllGather = 0xC3,
  kReduceScatter = 0xC4,
  kBroadcast = 0xC5,
  kSetup = 0xC6,  // the barrier that ends group setup
  kP2p = 0xA0,
};

uint64_t MakeSlot(SlotKind kind, uint64_t seq, uint64_t nbytes);

// Time left before `deadline`, at least 1 ms (Gloo reads 0 as "no
// timeout").
std::chrono::milliseconds TimeLeft(
    std::chrono::steady_clock::time_point deadline);

// Gloo's messages start with "[file:line] "; this drops it.
std::string StripGlooLocation(std::string msg);

class GlooExchange {
 public:
  using Clock = std::chrono::steady_clock;

  // `where` prefixes every message ("allreduce on group mp[0,1]");
  // `members` maps group ranks to global ranks; `timeout` is what a
  // timeout message reports. `on_failure` sees the first failure.
  GlooExchange(gloo::Context* context, std::string where,
               const std::vector<int>& members,
               std::chrono::milliseconds timeout, Clock::time_point deadline,
               std::function<void(const Status&)> on_failure);
  ~GlooExchange();

  // Posts a message to / from group rank `peer`; returns its id.
  int PostSend(int peer, const void* data, size_t nbytes, uint64_t slot);
  int PostRecv(int peer, void* data, size_t nbytes, uint64_t slot);

  // Waits for message `id` (once; later waits return OK).
  Status Wait(int id);
  // Waits for every message not waited yet, in posting order.
  Status WaitAll();

 private:
  struct Message {
    bool send = false;
    int peer = 0;
    size_t nbytes = 0;
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
    std::exception_ptr post_error;
    bool waited = false;
  };

  int Post(bool send, int peer, void* data, size_t nbytes, uint64_t slot);
  Status Translate(const Message& m, std::exception_ptr error) const;
  Status Fail(Status status);

  gloo::Context* context_;
  std::string where_;
  const std::vector<int>& members_;
  std::chrono::milliseconds timeout_;
  Clock::time_point deadline_;
  std::function<void(const Status&)> on_failure_;
  std::vector<Message> messages_;
};

}  // namespace loom

#endif  // LOOM_EXECUTOR_COMM_GLOO_EXCHANGE_H_
