// loom profile --comm's awake regime (calls back to back, the cores kept
// awake): which calls it times, and when its times are a stall.
#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

#include "profiling/host_profiler.h"

namespace loom {
namespace {

// The awake regime times the calls the socket takes at once: back to
// back, one that fills the send buffer stalls the calls after it.
TEST(Profile, AwakeCallsPutLessThanTheSendBufferOnTheWire) {
  CommProfileOptions step;  // 4 KiB to 16 MiB
  step.between_calls_min_seconds = 1e-4;
  step.between_calls_max_seconds = 1e-3;
  step.samples = 81;
  constexpr int64_t kBuffer = 4 << 20;
  const CommProfileOptions awake = AwakeCallOptions(step, kBuffer);
  EXPECT_EQ(awake.between_calls_max_seconds, 0);
  EXPECT_EQ(awake.samples, CommProfileOptions().samples);
  const std::vector<CommTiming> cases = CommCases(awake, 2);
  ASSERT_FALSE(cases.empty());
  int64_t largest_allreduce = 0;
  for (const CommTiming& c : cases) {
    EXPECT_LT(WireBytesOf(c), kBuffer) << c.op << " of " << c.bytes << " B";
    if (c.op == "allreduce") largest_allreduce = std::max(largest_allreduce, c.bytes);
  }
  EXPECT_EQ(largest_allreduce, 1 << 20);
  // A send buffer not known leaves every call in; a cap already set (a
  // shaped link's bucket) stays where it is lower.
  EXPECT_EQ(CommCases(AwakeCallOptions(step, 0), 2).size(), CommCases(step, 2).size());
  step.max_wire_bytes = 100 << 10;
  EXPECT_EQ(AwakeCallOptions(step, kBuffer).max_wire_bytes, 100 << 10);
}

// Calls back to back on awake cores slower than the same calls after
// compute, in most cases: a stall, not the link.
TEST(Profile, AwakeCallsSlowerThanAfterComputeAreAStall) {
  const std::vector<CommTiming> together = {{"allreduce", 2, 4096, 100e-6},
                                            {"allgather", 2, 4096, 60e-6},
                                            {"send", 2, 4096, 50e-6},
                                            {"allreduce", 2, 1 << 20, 600e-6}};
  std::vector<CommTiming> awake = {{"allreduce", 2, 4096, 45e-6},
                                   {"allgather", 2, 4096, 50e-6},
                                   {"send", 2, 4096, 40e-6},
                                   {"allreduce", 2, 1 << 20, 550e-6}};
  EXPECT_FALSE(AwakeCallsStalled(awake, together));
  awake[0].median_seconds = 110e-6;  // one slower call: noise
  EXPECT_FALSE(AwakeCallsStalled(awake, together));
  for (CommTiming& c : awake) c.median_seconds = 4e-3 + c.median_seconds;  // a tick each
  EXPECT_TRUE(AwakeCallsStalled(awake, together));
  // Calls the other regime did not time are not compared.
  EXPECT_FALSE(AwakeCallsStalled(awake, {}));
}

}  // namespace
}  // namespace loom
