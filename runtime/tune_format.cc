#include "runtime/tune_format.h"

#include <cstdio>

namespace loom {

std::string TuneMs(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f ms", seconds * 1e3);
  return buf;
}

std::string TuneBytes(int64_t bytes) {
  char buf[32];
  if (bytes < 1000000) {
    std::snprintf(buf, sizeof(buf), "%.1f kB", bytes / 1e3);
  } else if (bytes < 1000000000) {
    std::snprintf(buf, sizeof(buf), "%.1f MB", bytes / 1e6);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f GB", bytes / 1e9);
  }
  return buf;
}

}  // namespace loom
