// CPU kernels for lookup_table and lookup_table_grad.
#include <cstring>

#include "executor/kernels/cpu/cpu_helpers.h"

namespace loom {
namespace {

Status CheckIds(const Tensor& ids, int64_t vocab) {
  const int64_t* p = ids.data<int64_t>();
  for (int64_t i = 0, n = ids.numel(); i < n; ++i) {
    if (p[i] < 0 || p[i] >= vocab) {
      return InvalidArgument("Ids[", i, "] = ", p[i], " is out of range [0, ",
                             vocab, ")");
    }
  }
  return Status::OK();
}

Status LookupTableKernel(const KernelContext& ctx) {
  const Tensor& w = ctx.Input("W");
  const Tensor& ids = ctx.Input("Ids");
  Tensor* out = ctx.Output("Out");
  const int64_t vocab = w.dim(0);
  LOOM_RETURN_IF_ERROR(CheckIds(ids, vocab));
  const int64_t padding = ctx.Attr<int64_t>("padding_idx");
  // Rows are copied as bytes, so any table dtype works.
  const int64_t row = w.dim(1) * SizeOf(w.dtype());
  const auto* table = static_cast<const uint8_t*>(w.raw_data());
  auto* dst = static_cast<uint8_t*>(out->raw_data());
  const int64_t* p = ids.data<int64_t>();
  for (int64_t i = 0, n = ids.numel(); i < n; ++i) {
    if (p[i] == padding) {
      std::memset(dst + i * row, 0, row);
    } else {
      std::memcpy(dst + i * row, table + p[i] * row, row);
    }
  }
  return Status::OK();
}

Status LookupTableGradKernel(const KernelContext& ctx) {
  const Tensor& ids = ctx.Input("Ids");
  const Tensor& dout = ctx.Input("Out@GRAD");
  Tensor* dw = ctx.Output("W@GRAD");
  if (dw->dtype() != proto::FP32) {
    return Unimplemented("lookup_table_grad of ", DataTypeName(dw->dtype()));
  }
  const int64_t vocab = dw->dim(0);
  LOOM_RETURN_IF_ERROR(CheckIds(ids, vocab));
  const int64_t padding = ctx.Attr<int64_t>("padding_idx");
  const int64_t h = dw->dim(1);
  float* g = dw->data<float>();
  std::memset(g, 0, dw->bytes());
  const float* src = dout.data<float>();
  const int64_t* p = ids.data<int64_t>();
  // Positions in order: a fixed summation order for repeated ids.
  for (int64_t i = 0, n = ids.numel(); i < n; ++i) {
    if (p[i] == padding) continue;
    float* row = g + p[i] * h;
    const float* d = src + i * h;
    for (int64_t j = 0; j < h; ++j) row[j] += d[j];
  }
  return Status::OK();
}

}  // namespace

void RegisterEmbeddingCpuKernels() {
  auto& r = KernelRegistry::Cpu();
  r.Register("lookup_table", LookupTableKernel);
  r.Register("lookup_table_grad", LookupTableGradKernel);
}

}  // namespace loom
