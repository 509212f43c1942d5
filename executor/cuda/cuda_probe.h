// What this process's CUDA runtime
// sees, and one kernel that proves the code compiled for sm_80/sm_90 runs
// on the device there is. Plain types only, so that nvcc compiles nothing
// of Loom's beyond this header.
#ifndef LOOM_EXECUTOR_CUDA_CUDA_PROBE_H_
#define LOOM_EXECUTOR_CUDA_CUDA_PROBE_H_

#include <string>
#include <vector>

namespace loom {

struct CudaProbe {
  int devices = 0;
  int runtime_version = 0;  // 13000 for CUDA 13.0
  int driver_version = 0;   // 0 without a driver
  // Where there is no device: the runtime's reason ("no CUDA-capable
  // device is detected", "CUDA driver version is insufficient ...").
  std::string why_none;
};

CudaProbe ProbeCuda();

// Fills `n` floats with `value` in a kernel on `device` and copies them
// into `out`. The CUDA error's text on failure, empty on success.
std::string FillOnDevice(int device, int n, float value, std::vector<float>* out);

// NCCL's version as "2.27.3", from the library linked in.
std::string NcclVersion();

}  // namespace loom

#endif  // LOOM_EXECUTOR_CUDA_CUDA_PROBE_H_
