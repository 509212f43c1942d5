#include "profiling/report_text.h"

#include <cmath>
#include <ctime>

#include "framework/status.h"
#include "profiling/cpu_pressure.h"

namespace loom {

std::string Time(double s) {
  char buf[32];
  if (s < 1e-3) {
    std::snprintf(buf, sizeof(buf), "%.2f us", s * 1e6);
  } else if (s < 1) {
    std::snprintf(buf, sizeof(buf), "%.3f ms", s * 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%.3f s", s);
  }
  return buf;
}

std::string Rate(double bytes_per_second) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g GB/s", bytes_per_second / 1e9);
  return buf;
}

std::string Today() {
  char buf[16];
  const std::time_t now = std::time(nullptr);
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", std::localtime(&now));
  return buf;
}

void PrintCommProgress(const std::string& what) {
  std::fprintf(stderr, "timing %s ...\n", what.c_str());
}

std::string PressureNote(double pressure) {
  if (pressure < 0) return "";
  return StrCat("CPU pressure ", static_cast<int>(std::lround(pressure)), "% before measuring",
                pressure >= kQuietCpuPressurePercent
                    ? " (other processes were running: expect slower, noisier values)"
                    : "");
}

}  // namespace loom
