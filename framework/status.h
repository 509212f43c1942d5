// Status and StatusOr: the error path for anything a user can cause.
//
// glog CHECK stays for internal invariants; a malformed program, an unknown op
// or a bad flag travels back as a Status whose message names the culprit.
#ifndef LOOM_FRAMEWORK_STATUS_H_
#define LOOM_FRAMEWORK_STATUS_H_

#include <sstream>
#include <string>
#include <utility>
#include <variant>

#include <glog/logging.h>

namespace loom {

template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,
  kOutOfRange,
  kUnimplemented,
  kInternal,
  kDataLoss,
  kUnavailable,
  kDeadlineExceeded,
  // Stopped for a reason the caller may handle and go on (a training step
  // whose loss is not finite, which a trainer may skip).
  kAborted,
  // Out of memory on a device (the size asked and the device named).
  kResourceExhausted,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<code name>: <message>", or "OK".
  std::string ToString() const;

  // Prepends "<context>: " to the message, keeping the code. Used to add a
  // location (pass name, rank, job) as an error travels outward.
  Status WithContext(const std::string& context) const;

  // Marks a Status as deliberately ignored.
  void IgnoreError() const {}

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline std::ostream& operator<<(std::ostream& os, const Status& s) {
  return os << s.ToString();
}

template <typename... Args>
Status InvalidArgument(const Args&... args) {
  return Status(StatusCode::kInvalidArgument, StrCat(args...));
}
template <typename... Args>
Status NotFound(const Args&... args) {
  return Status(StatusCode::kNotFound, StrCat(args...));
}
template <typename... Args>
Status AlreadyExists(const Args&... args) {
  return Status(StatusCode::kAlreadyExists, StrCat(args...));
}
template <typename... Args>
Status FailedPrecondition(const Args&... args) {
  return Status(StatusCode::kFailedPrecondition, StrCat(args...));
}
template <typename... Args>
Status OutOfRange(const Args&... args) {
  return Status(StatusCode::kOutOfRange, StrCat(args...));
}
template <typename... Args>
Status Unimplemented(const Args&... args) {
  return Status(StatusCode::kUnimplemented, StrCat(args...));
}
template <typename... Args>
Status Internal(const Args&... args) {
  return Status(StatusCode::kInternal, StrCat(args...));
}
template <typename... Args>
Status DataLoss(const Args&... args) {
  return Status(StatusCode::kDataLoss, StrCat(args...));
}

template <typename... Args>
Status Aborted(const Args&... args) {
  return Status(StatusCode::kAborted, StrCat(args...));
}

template <typename... Args>
Status ResourceExhausted(const Args&... args) {
  return Status(StatusCode::kResourceExhausted, StrCat(args...));
}

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : value_(status) {  // NOLINT: implicit
    CHECK(!status.ok()) << "StatusOr built from an OK status without a value";
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit

  bool ok() const { return std::holds_alternative<T>(value_); }
  const Status& status() const {
    static const Status* const kOk = new Status();
    return ok() ? *kOk : std::get<Status>(value_);
  }
  const T& value() const& {
    CHECK(ok()) << status();
    return std::get<T>(value_);
  }
  T& value() & {
    CHECK(ok()) << status();
    return std::get<T>(value_);
  }
  T&& value() && {
    CHECK(ok()) << status();
    return std::get<T>(std::move(value_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  std::variant<Status, T> value_;
};

}  // namespace loom

#define LOOM_STATUS_CONCAT_INNER(a, b) a##b
#define LOOM_STATUS_CONCAT(a, b) LOOM_STATUS_CONCAT_INNER(a, b)

#define LOOM_RETURN_IF_ERROR(expr)              \
  do {                                          \
    ::loom::Status _loom_status = (expr);       \
    if (!_loom_status.ok()) return _loom_status; \
  } while (0)

#define LOOM_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#define LOOM_ASSIGN_OR_RETURN(lhs, expr) \
  LOOM_ASSIGN_OR_RETURN_IMPL(            \
      LOOM_STATUS_CONCAT(_loom_statusor_, __LINE__), lhs, expr)

#endif  // LOOM_FRAMEWORK_STATUS_H_
