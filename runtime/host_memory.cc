#include "runtime/host_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

namespace loom {
namespace {

// A "Name:   123 kB" line of a /proc file, in bytes; -1 when absent.
int64_t ProcKilobytes(const char* path, const std::string& name) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(name.size() + 1));
    int64_t kb = -1;
    fields >> kb;
    return kb < 0 ? -1 : kb * 1024;
  }
  return -1;
}

std::string Gigabytes(int64_t bytes) {
  std::ostringstream s;
  s.precision(3);
  s << static_cast<double>(bytes) / 1e9 << " GB";
  return s.str();
}

}  // namespace

int64_t AvailableHostBytes() {
  int64_t available = ProcKilobytes("/proc/meminfo", "MemAvailable");
  if (available < 0) {
    available = static_cast<int64_t>(sysconf(_SC_AVPHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  }
  struct rlimit limit;
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    const int64_t used = std::max<int64_t>(0, ProcKilobytes("/proc/self/status", "VmSize"));
    available = std::min<int64_t>(available, static_cast<int64_t>(limit.rlim_cur) - used);
  }
  return std::max<int64_t>(0, available);
}

Status CheckFitsInHost(int64_t bytes, const std::string& what, const std::string& lower) {
  const int64_t available = AvailableHostBytes();
  if (bytes <= available) return Status::OK();
  return FailedPrecondition(what, " needs ", Gigabytes(bytes), " of tensors, more than the ",
                            Gigabytes(available), " this host has available; lower ", lower);
}

}  // namespace loom
