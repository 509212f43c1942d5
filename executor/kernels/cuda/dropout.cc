// CUDA kernels for dropout and dropout_grad (host side): the CPU kernel's
// validation and mask keys (kernels/cpu/dropout.cc), the draws in
// dropout.cu. X and Out (and their gradients) are fp32, bf16 or fp16.
#include <vector>

#include "executor/kernels/cuda/cuda_kernel_helpers.h"
#include "executor/kernels/kernel_shapes.h"
#include "framework/counter_rng.h"

namespace loom {
StatusOr<cuda::DropoutPlan> DropoutPlanFor(const KernelContext& ctx, const Tensor& x) {
  // The shard attributes index memory: checked as on the CPU.
  LOOM_ASSIGN_OR_RETURN(const DropoutRowLayout layout, DropoutRowLayoutOf(ctx, x));
  const Shape& local = layout.local;
  std::vector<int64_t> stride = layout.stride;
  cuda::DropoutPlan plan;
  plan.rows = layout.rows;
  plan.row_len = NumElements(local);
  // The local dims each element decodes, folded where contiguous in the
  // full row too (the CPU walks the same indices with an odometer).
  Shape dims = local;
  std::vector<int64_t> local_stride = ContiguousStrides(local);
  FoldDims(&dims, {&local_stride, &stride});
  if (dims.size() > static_cast<size_t>(cuda::kMaxDims)) {
    return Unimplemented("dropout on CUDA of a row of more than ", cuda::kMaxDims,
                         " non-contiguous dims: X ", MetaToString(x.meta()));
  }
  plan.dims = static_cast<int>(dims.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    plan.local[d] = dims[d];
    plan.full_stride[d] = stride[d];
  }
  plan.first = layout.first;
  plan.step_key = StreamAt(Mix64(static_cast<uint64_t>(ctx.Attr<int64_t>("seed"))),
                           static_cast<uint64_t>(ctx.run().step));
  plan.row_offset = ctx.run().row_offset;
  plan.p = ctx.Attr<float>("dropout_prob");
  plan.scale = DropoutKeptScale(ctx);
  return plan;
}

namespace {

Status DropoutKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  // Mask is an output like any other, so it may be pruned; so may Out.
  Tensor* out = ctx.HasOutput("Out") ? ctx.Output("Out") : nullptr;
  LOOM_ASSIGN_OR_RETURN(cuda::FloatType t, FloatTypeOf(ctx, {&x, out}));
  const float p = ctx.Attr<float>("dropout_prob");
  const bool pass = ctx.Attr<bool>("is_test") || p == 0.0f;
  bool* mask = ctx.HasOutput("Mask") ? ctx.Output("Mask")->data<bool>() : nullptr;
  void* pout = out ? out->raw_data() : nullptr;
  if (pass) {
    cuda::LaunchDropoutPass(t, x.raw_data(), mask, pout, x.numel(), NativeStream(ctx));
    return LastLaunchStatus("dropout");
  }
  LOOM_ASSIGN_OR_RETURN(cuda::DropoutPlan plan, DropoutPlanFor(ctx, x));
  cuda::LaunchDropout(t, plan, x.raw_data(), mask, pout, NativeStream(ctx));
  return LastLaunchStatus("dropout");
}

Status DropoutGradKernel(const KernelContext& ctx) {
  const Tensor& dout = ctx.Input("Out@GRAD");
  Tensor* dx = ctx.Output("X@GRAD");
  LOOM_ASSIGN_OR_RETURN(cuda::FloatType t, FloatTypeOf(ctx, {&dout, dx}));
  cuda::LaunchDropoutGrad(t, ctx.Input("Mask").data<bool>(), dout.raw_data(), dx->raw_data(),
                          dout.numel(), DropoutKeptScale(ctx), NativeStream(ctx));
  return LastLaunchStatus("dropout_grad");
}

}  // namespace

void RegisterDropoutCudaKernels() {
  auto& r = KernelRegistry::Cuda();
  r.Register("dropout", DropoutKernel, LowPrecision::kNative);
  r.Register("dropout_grad", DropoutGradKernel, LowPrecision::kNative);
}

}  // namespace loom
