#include "cost_model/text_proto.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

namespace loom {
namespace {

class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (!first.empty()) return;
    // Protobuf ends its sentences with a period; Loom's errors do not.
    std::string text = message;
    if (!text.empty() && text.back() == '.') text.pop_back();
    first = StrCat("line ", line + 1, ", column ", column + 1, ": ", text);
  }
  std::string first;
};

Status Errno(const std::string& what, const std::string& path) {
  return Internal(path, ": ", what, ": ", std::strerror(errno));
}

}  // namespace

StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path, ": cannot open");
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return DataLoss(path, ": read failed");
  return buf.str();
}

Status ParseTextProto(const std::string& text, const std::string& origin,
                      google::protobuf::Message* message) {
  google::protobuf::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, message)) {
    return InvalidArgument(origin, ": ", errors.first);
  }
  return Status::OK();
}

Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    if (ec) {
      return Internal(path, ": cannot create directory ",
                      target.parent_path().string(), ": ", ec.message());
    }
  }
  // Unique per process and call, in the same directory so that the rename
  // stays on one file system and is atomic.
  static std::atomic<int> counter{0};
  const std::string tmp =
      StrCat(path, ".tmp.", getpid(), ".", counter.fetch_add(1));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return Errno("cannot create temporary file " + tmp, path);
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status s = Errno("write failed", tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return s;
    }
    done += static_cast<size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  const bool closed = ::close(fd) == 0;
  if (!synced || !closed) {
    Status s = Errno("flush failed", tmp);
    ::unlink(tmp.c_str());
    return s;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = Errno("cannot rename " + tmp + " over it", path);
    ::unlink(tmp.c_str());
    return s;
  }
  return Status::OK();
}

std::string TextProtoToString(const google::protobuf::Message& message) {
  std::string out;
  CHECK(google::protobuf::TextFormat::PrintToString(message, &out));
  return out;
}

}  // namespace loom
