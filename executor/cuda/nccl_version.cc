#include <nccl.h>

#include "executor/cuda/cuda_probe.h"

namespace loom {

std::string NcclVersion() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess) return "";
  // NCCL >= 2.9 packs major * 10000 + minor * 100 + patch.
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100);
}

}  // namespace loom
