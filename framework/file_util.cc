#include "framework/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <glog/logging.h>
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

// A device or a pipe (/dev/null, /dev/stdout) is written in place: it cannot
// be replaced.
bool IsSpecialFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
}

Status MakeParentDirectory(const std::string& path) {
  const std::filesystem::path target(path);
  if (!target.has_parent_path()) return Status::OK();
  std::error_code ec;
  std::filesystem::create_directories(target.parent_path(), ec);
  if (ec) {
    return NotFound(path, ": cannot create directory ", target.parent_path().string(), ": ",
                    ec.message());
  }
  return Status::OK();
}

}  // namespace

Status CheckWritable(const std::string& path) {
  if (IsSpecialFile(path)) {
    std::ofstream out(path, std::ios::binary | std::ios::app);
    return out ? Status::OK() : NotFound(path, ": cannot open for writing");
  }
  LOOM_RETURN_IF_ERROR(MakeParentDirectory(path));
  const std::string probe = StrCat(path, ".probe.", getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return NotFound(path, ": cannot write here: ", std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  return Status::OK();
}

Status WriteFileAtomically(const std::string& path, const std::string& bytes) {
  if (IsSpecialFile(path)) {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return out ? Status::OK() : DataLoss(path, ": write failed");
  }
  LOOM_RETURN_IF_ERROR(MakeParentDirectory(path));
  // Beside the target (rename is atomic only within one file system), with
  // a name no other writer uses.
  static std::atomic<int> serial{0};
  const std::string tmp = StrCat(path, ".tmp.", getpid(), ".", serial++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return NotFound(path, ": cannot open for writing: ", std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return DataLoss(path, ": write failed: ", why);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return DataLoss(path, ": write failed: ", why);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return DataLoss(path, ": cannot replace: ", why);
  }
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return SyncDirectory(parent.empty() ? "." : parent.string());
}

Status SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return NotFound(dir, ": cannot open directory: ", std::strerror(errno));
  const bool ok = ::fsync(fd) == 0;
  const std::string why = ok ? "" : std::strerror(errno);
  ::close(fd);
  return ok ? Status::OK() : DataLoss(dir, ": fsync failed: ", why);
}

StatusOr<std::string> ReadFile(const std::string& path) {
  // A directory opens, and reads as empty: it is not a file to read.
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return InvalidArgument(path, ": not a regular file", S_ISDIR(st.st_mode) ? " (a directory)" : "");
  }
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

std::string TextProtoToString(const google::protobuf::Message& message) {
  std::string out;
  CHECK(google::protobuf::TextFormat::PrintToString(message, &out));
  return out;
}

}  // namespace loom
