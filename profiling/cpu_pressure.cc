#include "profiling/cpu_pressure.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

namespace loom {

double CpuPressure() {
  std::FILE* f = std::fopen("/proc/pressure/cpu", "r");
  if (f == nullptr) return -1;
  double avg10 = -1;
  if (std::fscanf(f, "some avg10=%lf", &avg10) != 1) avg10 = -1;
  std::fclose(f);
  return avg10;
}

double WaitForQuietCpu(const QuietCpuWait& wait) {
  const auto sleep = wait.sleep ? wait.sleep : [](double seconds) {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  };
  double pressure = wait.read_pressure();
  // Unknown (-1) counts as quiet: there is nothing to wait for.
  if (pressure < wait.below_percent || wait.max_seconds <= 0) return pressure;
  std::fprintf(stderr,
               "waiting up to %g s for other processes to leave the CPU: some task waited for a "
               "core %ld%% of the last 10 s (measuring under %g%%) ...\n",
               wait.max_seconds, std::lround(pressure), wait.below_percent);
  for (double waited = 0; waited < wait.max_seconds && pressure >= wait.below_percent;) {
    const double step = std::min(wait.poll_seconds, wait.max_seconds - waited);
    sleep(step);
    waited += step;
    pressure = wait.read_pressure();
  }
  return pressure;
}

}  // namespace loom
