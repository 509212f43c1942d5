// Which of OpenBLAS's kernel families this process runs, and a better one
// where OpenBLAS did not recognise the CPU.
//
// OpenBLAS (built for every x86-64, as Debian builds it) picks its kernels
// when it loads, by CPU model. A release older than the CPU falls back to
// its SSE3 kernels ("Prescott"): Debian 12's 0.3.21 does so on Intel's
// family 6 model 207, at a third of the SkylakeX kernels' rate there
// (measured: docs/performance.md, "Measurements behind the code"). The variable is
// read at load time, so a process can only take it up by running again.
#ifndef LOOM_EXECUTOR_CPU_BLAS_KERNELS_H_
#define LOOM_EXECUTOR_CPU_BLAS_KERNELS_H_

#include <optional>
#include <string>

namespace loom {

// The vector extensions OpenBLAS's x86-64 kernel families are built for.
struct CpuVectorUnits {
  bool avx2_fma = false;  // AVX2 and FMA3: the Haswell and Zen kernels
  bool avx512 = false;    // AVX-512 F, CD, BW, DQ and VL: the SkylakeX kernels
};

// This CPU's, as the compiler's runtime reads them (cpuid).
CpuVectorUnits HostVectorUnits();

// The kernel family OpenBLAS chose for this process ("Prescott",
// "SkylakeX", ...).
std::string LoadedBlasKernels();

// The family to ask for (as OPENBLAS_CORETYPE) where `loaded` uses none
// of the CPU's AVX2 or AVX-512 units (OpenBLAS did not know the CPU):
// SkylakeX with AVX-512, Haswell with AVX2 and FMA. nullopt where `loaded`
// is a family built for AVX2 or later (OpenBLAS's own choice then stands),
// or the CPU has neither.
std::optional<std::string> BetterBlasKernels(const std::string& loaded,
                                             const CpuVectorUnits& cpu);

}  // namespace loom

#endif  // LOOM_EXECUTOR_CPU_BLAS_KERNELS_H_
