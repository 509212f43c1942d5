#include "executor/comm/gloo_exchange.h"

#include <algorithm>
#include <utility>

#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include "executor/comm/communicator.h"

namespace loom {
namespace {

bool Contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

std::chrono::milliseconds TimeLeft(
    std::chrono::steady_clock::time_point deadline) {
  using Millis = std::chrono::milliseconds;
  auto left = std::chrono::duration_cast<Millis>(
      deadline - std::chrono::steady_clock::now());
  return std::max(left, Millis(1));
}

uint64_t MakeSlot(SlotKind kind, uint64_t seq, uint64_t nbytes) {
  return (static_cast<uint64_t>(kind) << 56) | ((seq & 0xFFFFFF) << 32) |
         (nbytes & 0xFFFFFFFF);
}

std::string StripGlooLocation(std::string msg) {
  while (!msg.empty() && msg[0] == '[') {
    size_t end = msg.find("] ");
    if (end == std::string::npos) break;
    msg = msg.substr(end + 2);
  }
  return msg;
}

GlooExchange::GlooExchange(gloo::Context* context, std::string where,
                           const std::vector<int>& members,
                           std::chrono::milliseconds timeout,
                           Clock::time_point deadline,
                           std::function<void(const Status&)> on_failure)
    : context_(context),
      where_(std::move(where)),
      members_(members),
      timeout_(timeout),
      deadline_(deadline),
      on_failure_(std::move(on_failure)) {}

GlooExchange::~GlooExchange() = default;

int GlooExchange::PostSend(int peer, const void* data, size_t nbytes,
                           uint64_t slot) {
  // Gloo's buffers are not const, but a send only reads.
  return Post(/*send=*/true, peer, const_cast<void*>(data), nbytes, slot);
}

int GlooExchange::PostRecv(int peer, void* data, size_t nbytes, uint64_t slot) {
  return Post(/*send=*/false, peer, data, nbytes, slot);
}

int GlooExchange::Post(bool send, int peer, void* data, size_t nbytes,
                       uint64_t slot) {
  Message m;
  m.send = send;
  m.peer = peer;
  m.nbytes = nbytes;
  try {
    m.buffer = context_->createUnboundBuffer(data, nbytes);
    if (send) {
      m.buffer->send(peer, slot, 0, nbytes);
    } else {
      m.buffer->recv(peer, slot, 0, nbytes);
    }
  } catch (...) {
    m.post_error = std::current_exception();
  }
  messages_.push_back(std::move(m));
  return static_cast<int>(messages_.size()) - 1;
}

Status GlooExchange::Wait(int id) {
  Message& m = messages_[id];
  if (m.waited) return Status::OK();
  m.waited = true;
  if (m.post_error) return Fail(Translate(m, m.post_error));
  try {
    bool completed = m.send ? m.buffer->waitSend(TimeLeft(deadline_))
                            : m.buffer->waitRecv(TimeLeft(deadline_));
    if (!completed) {
      return Fail(Status(StatusCode::kUnavailable,
                         StrCat(where_, ": aborted while waiting for rank ",
                                members_[m.peer])));
    }
  } catch (...) {
    return Fail(Translate(m, std::current_exception()));
  }
  return Status::OK();
}

Status GlooExchange::WaitAll() {
  for (size_t i = 0; i < messages_.size(); ++i) {
    LOOM_RETURN_IF_ERROR(Wait(static_cast<int>(i)));
  }
  return Status::OK();
}

Status GlooExchange::Translate(const Message& m,
                               std::exception_ptr error) const {
  const int peer = members_[m.peer];
  const std::string what =
      StrCat(m.send ? "send" : "recv", " of ", m.nbytes, " bytes");
  try {
    std::rethrow_exception(error);
  } catch (const gloo::IoException& e) {
    const std::string msg = StripGlooLocation(e.what());
    // UnboundBuffer::waitRecv / waitSend on their timeout.
    if (Contains(msg, "Timed out waiting")) {
      return Status(
          StatusCode::kDeadlineExceeded,
          StrCat(where_, ": timed out after ", FormatTimeout(timeout_),
                 " waiting for rank ", peer, " (", what, ")"));
    }
    // Another wait on this context timed out and Gloo closed every pair.
    if (Contains(msg, "Application timeout")) {
      return Status(
          StatusCode::kUnavailable,
          StrCat(where_, ": aborted while waiting for rank ", peer, " (", what,
                 "): another operation on this group timed out"));
    }
    return Status(
        StatusCode::kUnavailable,
        StrCat(where_, ": lost the connection to rank ", peer, " (", what,
               "; the peer exited, or failed and closed its end): ", msg));
  } catch (const gloo::EnforceNotMet& e) {
    return Status(StatusCode::kInternal,
                  StrCat(where_, ": Gloo check failed with rank ", peer, " (",
                         what, "): ", StripGlooLocation(e.what())));
  } catch (const std::exception& e) {
    return Status(StatusCode::kInternal,
                  StrCat(where_, ": Gloo error with rank ", peer, " (", what,
                         "): ", StripGlooLocation(e.what())));
  } catch (...) {
    return Status(StatusCode::kInternal,
                  StrCat(where_, ": unknown Gloo error with rank ", peer, " (",
                         what, ")"));
  }
}

Status GlooExchange::Fail(Status status) {
  for (Message& m : messages_) {
    if (m.waited || m.post_error) continue;
    m.waited = true;
    try {
      if (m.send) {
        m.buffer->waitSend(TimeLeft(deadline_));
      } else {
        m.buffer->waitRecv(TimeLeft(deadline_));
      }
    } catch (...) {
    }
  }
  if (on_failure_) on_failure_(status);
  return status;
}

}  // namespace loom
