#include "executor/cpu/blas_kernels.h"

#include <algorithm>
#include <cctype>

extern "C" char* openblas_get_corename(void);

namespace loom {

CpuVectorUnits HostVectorUnits() {
  CpuVectorUnits units;
#if defined(__x86_64__)
  __builtin_cpu_init();
  units.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  units.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                 __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                 __builtin_cpu_supports("avx512vl");
#endif
  return units;
}

std::string LoadedBlasKernels() {
  const char* name = openblas_get_corename();
  return name != nullptr ? name : "";
}

std::optional<std::string> BetterBlasKernels(const std::string& loaded,
                                             const CpuVectorUnits& cpu) {
  std::string family = loaded;
  std::transform(family.begin(), family.end(), family.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // OpenBLAS's x86-64 families with AVX2 kernels or wider.
  for (const char* modern : {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"}) {
    if (family == modern) return std::nullopt;
  }
  if (cpu.avx512) return "SkylakeX";
  if (cpu.avx2_fma) return "Haswell";
  return std::nullopt;
}

}  // namespace loom
