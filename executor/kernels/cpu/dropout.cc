// CPU kernels for dropout and dropout_grad.
#include <algorithm>

#include "executor/kernels/cpu/cpu_helpers.h"
#include "executor/kernels/kernel_shapes.h"
#include "framework/counter_rng.h"

namespace loom {
namespace {

// The mask of seed, step, global row and index in the full row (the op's
// Doc): a row's stream is keyed by (seed, step, global row), and an
// element draws the entry of its index in the logical full row, so a
// shard of rows or of heads draws exactly what the whole tensor would
// there.
Status DropoutKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  if (x.dtype() != proto::FP32) {
    return Unimplemented("dropout of ", DataTypeName(x.dtype()));
  }
  const float p = ctx.Attr<float>("dropout_prob");
  const bool pass = ctx.Attr<bool>("is_test") || p == 0.0f;
  const float scale = DropoutKeptScale(ctx);
  const float* px = x.data<float>();
  const int64_t n = x.numel();
  // Mask is an output like any other, so it may be pruned.
  bool* mask =
      ctx.HasOutput("Mask") ? ctx.Output("Mask")->data<bool>() : nullptr;
  float* out =
      ctx.HasOutput("Out") ? ctx.Output("Out")->data<float>() : nullptr;
  if (pass) {
    for (int64_t i = 0; i < n; ++i) {
      if (mask) mask[i] = true;
      if (out) out[i] = px[i];
    }
    return Status::OK();
  }
  // The shard attributes are verified against X's shape by shape
  // inference; checked again here, as they index memory.
  LOOM_ASSIGN_OR_RETURN(const DropoutRowLayout layout, DropoutRowLayoutOf(ctx, x));
  const Shape& local = layout.local;
  const std::vector<int64_t>& stride = layout.stride;
  const size_t row_dims = local.size();
  const int64_t rows = layout.rows;
  const int64_t row_len = NumElements(local);
  // The last dim is contiguous in the full row too: walk it in runs.
  const int64_t run_len = row_dims == 0 ? 1 : local.back();
  const RunInfo& info = ctx.run();
  const uint64_t step_key = StreamAt(Mix64(static_cast<uint64_t>(ctx.Attr<int64_t>("seed"))),
                                     static_cast<uint64_t>(info.step));
  std::vector<int64_t> idx(row_dims, 0);
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t row_key = StreamAt(step_key, static_cast<uint64_t>(info.row_offset + r));
    std::fill(idx.begin(), idx.end(), 0);
    int64_t j = layout.first;
    for (int64_t e = r * row_len, end = e + row_len; e < end; e += run_len) {
      for (int64_t q = 0; q < run_len; ++q) {
        const bool keep = ToUnit(StreamAt(row_key, static_cast<uint64_t>(j + q))) >= p;
        if (mask) mask[e + q] = keep;
        if (out) out[e + q] = keep ? px[e + q] * scale : 0.0f;
      }
      // Advance the odometer over the row's outer dims.
      for (int64_t d = static_cast<int64_t>(row_dims) - 2; d >= 0; --d) {
        j += stride[d];
        if (++idx[d] < local[d]) break;
        j -= stride[d] * local[d];
        idx[d] = 0;
      }
    }
  }
  return Status::OK();
}

Status DropoutGradKernel(const KernelContext& ctx) {
  const Tensor& dout = ctx.Input("Out@GRAD");
  if (dout.dtype() != proto::FP32) {
    return Unimplemented("dropout_grad of ", DataTypeName(dout.dtype()));
  }
  const bool* mask = ctx.Input("Mask").data<bool>();
  const float* g = dout.data<float>();
  float* dx = ctx.Output("X@GRAD")->data<float>();
  const float scale = DropoutKeptScale(ctx);
  for (int64_t i = 0, n = dout.numel(); i < n; ++i) {
    dx[i] = mask[i] ? g[i] * scale : 0.0f;
  }
  return Status::OK();
}

}  // namespace

void RegisterDropoutCpuKernels() {
  auto& r = KernelRegistry::Cpu();
  r.Register("dropout", DropoutKernel);
  r.Register("dropout_grad", DropoutGradKernel);
}

}  // namespace loom
