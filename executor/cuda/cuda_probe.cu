#include "executor/cuda/cuda_probe.h"

#include <cuda_runtime.h>

namespace loom {
namespace {

__global__ void FillKernel(float* out, int n, float value) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}

std::string ErrorText(cudaError_t e, const char* what) {
  return std::string(what) + ": " + cudaGetErrorString(e);
}

}  // namespace

CudaProbe ProbeCuda() {
  CudaProbe p;
  cudaRuntimeGetVersion(&p.runtime_version);
  if (cudaDriverGetVersion(&p.driver_version) != cudaSuccess) p.driver_version = 0;
  const cudaError_t e = cudaGetDeviceCount(&p.devices);
  if (e != cudaSuccess) {
    p.devices = 0;
    p.why_none = cudaGetErrorString(e);
    cudaGetLastError();  // clear it, so that it does not surface later
  } else if (p.devices == 0) {
    p.why_none = "the runtime lists no device";
  }
  return p;
}

std::string FillOnDevice(int device, int n, float value, std::vector<float>* out) {
  cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess) return ErrorText(e, "cudaSetDevice");
  float* buffer = nullptr;
  e = cudaMalloc(&buffer, sizeof(float) * n);
  if (e != cudaSuccess) return ErrorText(e, "cudaMalloc");
  const int threads = 256;
  FillKernel<<<(n + threads - 1) / threads, threads>>>(buffer, n, value);
  e = cudaGetLastError();
  out->assign(n, 0.0f);
  if (e == cudaSuccess) e = cudaMemcpy(out->data(), buffer, sizeof(float) * n, cudaMemcpyDeviceToHost);
  const cudaError_t freed = cudaFree(buffer);
  if (e != cudaSuccess) return ErrorText(e, "fill kernel");
  if (freed != cudaSuccess) return ErrorText(freed, "cudaFree");
  return "";
}

}  // namespace loom
