// How busy the host's CPUs are with other work, read before a measurement
// starts: on a shared host a busy neighbour slows every timing, and a
// profile taken beside one prices every plan after it.
#ifndef LOOM_PROFILING_CPU_PRESSURE_H_
#define LOOM_PROFILING_CPU_PRESSURE_H_

#include <functional>

namespace loom {

// The share of the last 10 s in which some runnable task waited for a CPU
// (Linux PSI), in percent, or -1 where the kernel does not report it. Read
// before measuring: the measurement's own threads raise it.
double CpuPressure();

// Under this CpuPressure() the host is quiet: a measurement waits for it,
// and one taken above it is reported as taken beside other work.
inline constexpr double kQuietCpuPressurePercent = 5;

// How long to wait for a quiet host before measuring.
struct QuietCpuWait {
  double below_percent = kQuietCpuPressurePercent;
  double max_seconds = 60;   // then measure anyway
  double poll_seconds = 1;
  // Where the readings come from and how time passes (tests replace them).
  std::function<double()> read_pressure = CpuPressure;
  std::function<void(double seconds)> sleep;  // default: the thread sleeps
};

// Waits until the host is quiet or `wait.max_seconds` have passed, saying so
// once on stderr when it has to wait, and returns the last reading (-1:
// unknown, returned at once). The 10 s average decays slowly: after a
// minute's full load it takes about half a minute to fall under 5%.
double WaitForQuietCpu(const QuietCpuWait& wait);

}  // namespace loom

#endif  // LOOM_PROFILING_CPU_PRESSURE_H_
