// Waiting for a quiet host before measuring, over made-up readings and a
// clock that only the waits move.
#include "profiling/cpu_pressure.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace loom {
namespace {

// Readings in turn (the last repeated), and the seconds slept.
struct FakeHost {
  std::vector<double> readings;
  size_t next = 0;
  double slept = 0;

  QuietCpuWait Wait(double max_seconds) {
    QuietCpuWait wait;
    wait.max_seconds = max_seconds;
    wait.read_pressure = [this] {
      const double r = readings[std::min(next, readings.size() - 1)];
      ++next;
      return r;
    };
    wait.sleep = [this](double seconds) { slept += seconds; };
    return wait;
  }
};

TEST(WaitForQuietCpu, MeasuresAtOnceOnAQuietHost) {
  FakeHost host{{2.5}};
  EXPECT_EQ(WaitForQuietCpu(host.Wait(60)), 2.5);
  EXPECT_EQ(host.slept, 0);
  EXPECT_EQ(host.next, 1u);
}

TEST(WaitForQuietCpu, WaitsUntilThePressureFallsUnderTheThreshold) {
  FakeHost host{{29, 17, 9, 4.9, 0}};
  EXPECT_EQ(WaitForQuietCpu(host.Wait(60)), 4.9);
  EXPECT_EQ(host.slept, 3);  // three polls of a second each
  EXPECT_EQ(host.next, 4u);
}

TEST(WaitForQuietCpu, GivesUpAfterTheLongestWaitWithTheLastReading) {
  FakeHost host{{80, 70, 60}};
  EXPECT_EQ(WaitForQuietCpu(host.Wait(2.5)), 60);
  EXPECT_DOUBLE_EQ(host.slept, 2.5);  // 1 + 1 + the half second left
}

TEST(WaitForQuietCpu, NeitherWaitsWhenToldNotToNorWhenThePressureIsUnknown) {
  FakeHost busy{{90}};
  EXPECT_EQ(WaitForQuietCpu(busy.Wait(0)), 90);
  EXPECT_EQ(busy.slept, 0);
  FakeHost unknown{{-1}};
  EXPECT_EQ(WaitForQuietCpu(unknown.Wait(60)), -1);
  EXPECT_EQ(unknown.slept, 0);
}

// The real reading: a percentage where Linux reports it.
TEST(CpuPressure, IsAShareOrUnknown) {
  const double p = CpuPressure();
  if (p < 0) GTEST_SKIP() << "this kernel does not report CPU pressure (/proc/pressure/cpu)";
  EXPECT_LE(p, 100);
}

}  // namespace
}  // namespace loom
