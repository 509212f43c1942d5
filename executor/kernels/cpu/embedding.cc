// CPU kernels for lookup_table and lookup_table_grad.
#include <cstring>

#include "executor/kernels/cpu/cpu_helpers.h"

namespace loom {
namespace {

// Maps global ids to rows of the local table: W holds rows [start, start +
// vocab) of the full table, or all of it when start is -1 (unsharded).
class RowMap {
 public:
  RowMap(int64_t start, int64_t vocab) : start_(start), vocab_(vocab) {}

  // Unsharded, every id must be a row; sharded, only negative ids are wrong
  // (ids past the shard belong to other ranks).
  Status Check(const Tensor& ids) const {
    const int64_t* p = ids.data<int64_t>();
    for (int64_t i = 0, n = ids.numel(); i < n; ++i) {
      if (start_ == -1 && (p[i] < 0 || p[i] >= vocab_)) {
        return InvalidArgument("Ids[", i, "] = ", p[i], " is out of range [0, ",
                               vocab_, ")");
      }
      if (start_ != -1 && p[i] < 0) {
        return InvalidArgument("Ids[", i, "] = ", p[i],
                               " is negative (W is the shard of rows [", start_,
                               ", ", start_ + vocab_, "))");
      }
    }
    return Status::OK();
  }

  // The local row of a checked id, or -1 when another shard holds it.
  int64_t Row(int64_t id) const {
    if (start_ == -1) return id;
    const int64_t r = id - start_;
    return r >= 0 && r < vocab_ ? r : -1;
  }

 private:
  int64_t start_;
  int64_t vocab_;
};

Status LookupTableKernel(const KernelContext& ctx) {
  const Tensor& w = ctx.Input("W");
  const Tensor& ids = ctx.Input("Ids");
  Tensor* out = ctx.Output("Out");
  const RowMap rows(ctx.Attr<int64_t>("start_index"), w.dim(0));
  LOOM_RETURN_IF_ERROR(rows.Check(ids));
  const int64_t padding = ctx.Attr<int64_t>("padding_idx");
  // Rows are copied as bytes, so any table dtype works.
  const int64_t row = w.dim(1) * SizeOf(w.dtype());
  const auto* table = static_cast<const uint8_t*>(w.raw_data());
  auto* dst = static_cast<uint8_t*>(out->raw_data());
  const int64_t* p = ids.data<int64_t>();
  for (int64_t i = 0, n = ids.numel(); i < n; ++i) {
    const int64_t r = p[i] == padding ? -1 : rows.Row(p[i]);
    if (r < 0) {
      std::memset(dst + i * row, 0, row);
    } else {
      std::memcpy(dst + i * row, table + r * row, row);
    }
  }
  return Status::OK();
}

Status LookupTableGradKernel(const KernelContext& ctx) {
  const Tensor& ids = ctx.Input("Ids");
  const Tensor& dout = ctx.Input("Out@GRAD");
  if (!ctx.HasOutput("W@GRAD")) return Status::OK();
  Tensor* dw = ctx.Output("W@GRAD");
  if (dw->dtype() != proto::FP32) {
    return Unimplemented("lookup_table_grad of ", DataTypeName(dw->dtype()));
  }
  const RowMap rows(ctx.Attr<int64_t>("start_index"), dw->dim(0));
  LOOM_RETURN_IF_ERROR(rows.Check(ids));
  const int64_t padding = ctx.Attr<int64_t>("padding_idx");
  const int64_t h = dw->dim(1);
  float* g = dw->data<float>();
  std::memset(g, 0, dw->bytes());
  const float* src = dout.data<float>();
  const int64_t* p = ids.data<int64_t>();
  // Positions in order: a fixed summation order for repeated ids.
  for (int64_t i = 0, n = ids.numel(); i < n; ++i) {
    if (p[i] == padding) continue;
    const int64_t r = rows.Row(p[i]);
    if (r < 0) continue;
    float* row = g + r * h;
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
