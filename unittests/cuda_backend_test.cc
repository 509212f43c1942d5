// The CUDA backend's first piece: it compiles and links wherever the build
// found CUDA and NCCL (LOOM_CUDA), and its GPU tests skip, saying why,
// where there is no device. On this project's development machine (no
// GPU) only the NCCL test runs; nothing here claims a GPU result that was
// not measured on one.
#include <gtest/gtest.h>

#ifdef LOOM_WITH_CUDA
#include "executor/cuda/cuda_probe.h"
#endif

namespace loom {
namespace {

#ifndef LOOM_WITH_CUDA
TEST(CudaBackend, NotBuilt) {
  GTEST_SKIP() << "built without the CUDA backend (LOOM_CUDA=OFF, or configure found no "
                  "nvcc, CUDA toolkit and NCCL): nothing of it to test";
}
#else
// NCCL is linked in and answers: no device needed.
TEST(CudaBackend, NcclIsLinkedAndReportsItsVersion) {
  const std::string version = NcclVersion();
  ASSERT_FALSE(version.empty());
  EXPECT_EQ(version.rfind("2.", 0), 0u) << version;
}

TEST(CudaBackend, AKernelRunsOnEveryDevice) {
  const CudaProbe probe = ProbeCuda();
  EXPECT_GE(probe.runtime_version, 12000);
  if (probe.devices == 0) {
    GTEST_SKIP() << "no CUDA device (" << probe.why_none << "; runtime "
                 << probe.runtime_version << ", driver " << probe.driver_version
                 << "): the sm_80/sm_90 kernel compiled and linked but did not run";
  }
  for (int d = 0; d < probe.devices; ++d) {
    std::vector<float> out;
    const std::string error = FillOnDevice(d, 1000, 2.5f, &out);
    ASSERT_EQ(error, "") << "device " << d;
    ASSERT_EQ(out.size(), 1000u);
    for (float v : out) ASSERT_EQ(v, 2.5f) << "device " << d;
  }
}
#endif

}  // namespace
}  // namespace loom
