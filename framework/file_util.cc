#include "framework/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace loom {

Status WriteFileAtomically(const std::string& path, const std::string& bytes) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    // A device or a pipe (/dev/null, /dev/stdout) cannot be replaced.
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return out ? Status::OK() : DataLoss(path, ": write failed");
  }
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
  return Status::OK();
}

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path, ": cannot open");
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return DataLoss(path, ": read failed");
  return buf.str();
}

}  // namespace loom
