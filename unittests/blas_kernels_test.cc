// OpenBLAS's kernels: which family is better where OpenBLAS did not know
// the CPU, and that loom runs with it.
#include "executor/cpu/blas_kernels.h"

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "unittests/loom_cli.h"

namespace loom {
namespace {

constexpr CpuVectorUnits kSse{false, false};
constexpr CpuVectorUnits kAvx2{true, false};
constexpr CpuVectorUnits kAvx512{true, true};

TEST(BlasKernels, SseFallbackGetsTheWidestFamilyTheCpuRuns) {
  EXPECT_EQ(BetterBlasKernels("Prescott", kAvx512), "SkylakeX");
  EXPECT_EQ(BetterBlasKernels("Prescott", kAvx2), "Haswell");
  EXPECT_EQ(BetterBlasKernels("Core2", kAvx2), "Haswell");
  EXPECT_EQ(BetterBlasKernels("Sandybridge", kAvx512), "SkylakeX");
  // Nothing wider to run.
  EXPECT_EQ(BetterBlasKernels("Prescott", kSse), std::nullopt);
}

TEST(BlasKernels, OpenBlasOwnModernChoiceStands) {
  for (const char* family :
       {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", "SKYLAKEX"}) {
    // On an AVX-512 CPU too: an AVX2 family there (Haswell, Zen) was
    // OpenBLAS's choice for a CPU it knows, not a fallback.
    EXPECT_EQ(BetterBlasKernels(family, kAvx512), std::nullopt) << family;
  }
}

// `loom profile` times ops with kernels this CPU cannot better: where
// OpenBLAS falls back (this test binary may load "Prescott" on a CPU newer
// than the library), loom runs again with OPENBLAS_CORETYPE set.
TEST(BlasKernels, LoomProfilesWithTheBestKernelsTheCpuHas) {
  std::printf("this process: OpenBLAS's %s kernels\n", LoadedBlasKernels().c_str());
  const std::string table = ::testing::TempDir() + "/blas_kernels_table.pbtxt";
  const CliResult r = Loom("profile --preset gpt-tiny --layers 1 --in_step=false "
                           "--profile_samples 3 --profile_warmup 1 --cost_table " + table,
                           "env -u OPENBLAS_CORETYPE");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string mark = "(OpenBLAS's ";
  const size_t at = r.out.find(mark);
  ASSERT_NE(at, std::string::npos) << r.out;
  const size_t from = at + mark.size();
  const std::string family = r.out.substr(from, r.out.find(' ', from) - from);
  std::printf("loom profile: OpenBLAS's %s kernels\n", family.c_str());
  EXPECT_EQ(BetterBlasKernels(family, HostVectorUnits()), std::nullopt) << r.out;
}

}  // namespace
}  // namespace loom
