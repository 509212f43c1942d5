// CPU kernel for cast between fp32, bf16 and fp16.
#include <algorithm>
#include <cstring>

#include "executor/kernels/cpu/cpu_helpers.h"
#include "framework/low_precision.h"

namespace loom {
namespace {

Status CastKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  Tensor* out = ctx.Output("Out");
  const DataType from = x.dtype(), to = out->dtype();
  const int64_t n = x.numel();
  if (from == to) {
    std::memcpy(out->raw_data(), x.raw_data(), x.bytes());
  } else if (to == proto::FP32) {
    WidenToFloat(from, x.raw_data(), n, out->data<float>());
  } else if (from == proto::FP32) {
    NarrowFromFloat(to, x.data<float>(), n, out->raw_data());
  } else {
    // bf16 <-> fp16 through float, a block at a time.
    constexpr int64_t kBlock = 4096;
    float buffer[kBlock];
    const auto* src = static_cast<const uint8_t*>(x.raw_data());
    auto* dst = static_cast<uint8_t*>(out->raw_data());
    for (int64_t i = 0; i < n; i += kBlock) {
      const int64_t len = std::min(kBlock, n - i);
      WidenToFloat(from, src + i * SizeOf(from), len, buffer);
      NarrowFromFloat(to, buffer, len, dst + i * SizeOf(to));
    }
  }
  return Status::OK();
}

}  // namespace

void RegisterCastCpuKernels() {
  KernelRegistry::Cpu().Register("cast", CastKernel, LowPrecision::kNative);
}

}  // namespace loom
