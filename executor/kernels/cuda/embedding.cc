// CUDA kernels for lookup_table and lookup_table_grad (host side). The ids
// are checked as on the CPU (kernels/cpu/embedding.cc), which waits for
// the stream once per op: the error has to reach the host. W (and dW,
// dOut) may be fp32, bf16 or fp16; a low-precision dW is summed in fp32
// scratch and rounded once, as the CPU's is.
#include <cstdint>

#include "executor/kernels/cuda/cuda_kernel_helpers.h"

namespace loom {
namespace {

// Unsharded (start -1), every id must be a row of W; sharded, only
// negative ids are wrong (ids past the shard belong to other ranks).
Status CheckIds(const KernelContext& ctx, const Tensor& ids, int64_t start, int64_t vocab) {
  int64_t value = 0;
  const int64_t hi = start == -1 ? vocab : INT64_MAX;
  LOOM_ASSIGN_OR_RETURN(int64_t i, FirstOutOfRange(ctx, ids.data<int64_t>(), ids.numel(), 0, hi,
                                                   /*has_skip=*/false, 0, &value));
  if (i < 0) return Status::OK();
  if (start == -1) {
    return InvalidArgument("Ids[", i, "] = ", value, " is out of range [0, ", vocab, ")");
  }
  return InvalidArgument("Ids[", i, "] = ", value, " is negative (W is the shard of rows [", start,
                         ", ", start + vocab, "))");
}

Status LookupTableKernel(const KernelContext& ctx) {
  const Tensor& w = ctx.Input("W");
  const Tensor& ids = ctx.Input("Ids");
  Tensor* out = ctx.Output("Out");
  const int64_t start = ctx.Attr<int64_t>("start_index");
  LOOM_RETURN_IF_ERROR(CheckIds(ctx, ids, start, w.dim(0)));
  // Rows are copied as bytes, so any table dtype works.
  cuda::LaunchLookupTable(w.raw_data(), ids.data<int64_t>(), out->raw_data(), ids.numel(),
                          w.dim(1) * SizeOf(w.dtype()), start, w.dim(0),
                          ctx.Attr<int64_t>("padding_idx"), NativeStream(ctx));
  return LastLaunchStatus("lookup_table");
}

Status LookupTableGradKernel(const KernelContext& ctx) {
  const Tensor& ids = ctx.Input("Ids");
  const Tensor& dout = ctx.Input("Out@GRAD");
  if (!ctx.HasOutput("W@GRAD")) return Status::OK();
  Tensor* dw = ctx.Output("W@GRAD");
  LOOM_ASSIGN_OR_RETURN(cuda::FloatType t, FloatTypeOf(ctx, {&dout, dw}));
  const int64_t start = ctx.Attr<int64_t>("start_index");
  LOOM_RETURN_IF_ERROR(CheckIds(ctx, ids, start, dw->dim(0)));
  std::shared_ptr<void> sum_mem;
  float* sum = nullptr;
  if (t == cuda::kFp32) {
    sum = dw->data<float>();
  } else {
    LOOM_ASSIGN_OR_RETURN(sum_mem, Scratch(ctx, dw->numel() * int64_t{sizeof(float)}));
    sum = static_cast<float*>(sum_mem.get());
  }
  cuda::LaunchLookupTableGrad(t, dout.raw_data(), ids.data<int64_t>(), sum, ids.numel(),
                              dw->dim(1), start, dw->dim(0), ctx.Attr<int64_t>("padding_idx"),
                              NativeStream(ctx));
  if (t != cuda::kFp32) {
    LOOM_RETURN_IF_ERROR(LastLaunchStatus("lookup_table_grad"));
    cuda::LaunchCast(cuda::kFp32, sum, t, dw->raw_data(), dw->numel(), NativeStream(ctx));
  }
  return LastLaunchStatus("lookup_table_grad");
}

}  // namespace

void RegisterEmbeddingCudaKernels() {
  auto& r = KernelRegistry::Cuda();
  r.Register("lookup_table", LookupTableKernel, LowPrecision::kNative);
  r.Register("lookup_table_grad", LookupTableGradKernel, LowPrecision::kNative);
}

}  // namespace loom
