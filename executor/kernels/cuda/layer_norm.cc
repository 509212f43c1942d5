// CUDA kernels for layer_norm and layer_norm_grad (host side). X is viewed
// as [rows, h] with h the product of the normalized dims. X and Y (and
// their gradients) are fp32, bf16 or fp16; Scale, Bias, Mean and Variance
// (and their gradients) fp32 always, as the op's schema and AMP have them.
#include "executor/kernels/cuda/cuda_kernel_helpers.h"
#include "framework/ops/op_helpers.h"

namespace loom {
namespace {

struct RowsByH {
  int64_t rows;
  int64_t h;
};

StatusOr<RowsByH> SplitRows(const KernelContext& ctx, const Shape& x) {
  LOOM_ASSIGN_OR_RETURN(
      int axis, NormalizeAxis(ctx.Attr<int32_t>("begin_norm_axis"), static_cast<int>(x.size())));
  return RowsByH{NumElements(Shape(x.begin(), x.begin() + axis)),
                 NumElements(Shape(x.begin() + axis, x.end()))};
}

// The fp32 tensors: an error, not a CHECK, for another dtype.
Status RequireFp32(const KernelContext& ctx, const std::string& slot, const Tensor& t) {
  if (t.dtype() == proto::FP32) return Status::OK();
  return Unimplemented(ctx.type(), " on CUDA: ", slot, " is ", DataTypeName(t.dtype()),
                       ", not fp32");
}

StatusOr<const float*> OptionalData(const KernelContext& ctx, const std::string& slot) {
  if (!ctx.HasInput(slot)) return static_cast<const float*>(nullptr);
  const Tensor& t = ctx.Input(slot);
  LOOM_RETURN_IF_ERROR(RequireFp32(ctx, slot, t));
  return t.data<float>();
}

StatusOr<float*> OptionalOutput(const KernelContext& ctx, const std::string& slot) {
  if (!ctx.HasOutput(slot)) return static_cast<float*>(nullptr);
  Tensor* t = ctx.Output(slot);
  LOOM_RETURN_IF_ERROR(RequireFp32(ctx, slot, *t));
  return t->data<float>();
}

Status LayerNormKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  Tensor* y = ctx.Output("Y");
  LOOM_ASSIGN_OR_RETURN(cuda::FloatType t, FloatTypeOf(ctx, {&x, y}));
  LOOM_ASSIGN_OR_RETURN(RowsByH d, SplitRows(ctx, x.shape()));
  LOOM_ASSIGN_OR_RETURN(const float* scale, OptionalData(ctx, "Scale"));
  LOOM_ASSIGN_OR_RETURN(const float* bias, OptionalData(ctx, "Bias"));
  LOOM_ASSIGN_OR_RETURN(float* mean, OptionalOutput(ctx, "Mean"));
  LOOM_ASSIGN_OR_RETURN(float* var, OptionalOutput(ctx, "Variance"));
  cuda::LaunchLayerNorm(t, x.raw_data(), scale, bias, y->raw_data(), mean, var, d.rows, d.h,
                        ctx.Attr<float>("epsilon"), NativeStream(ctx));
  return LastLaunchStatus("layer_norm");
}

Status LayerNormGradKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const Tensor& dy = ctx.Input("Y@GRAD");
  Tensor* dx = ctx.HasOutput("X@GRAD") ? ctx.Output("X@GRAD") : nullptr;
  LOOM_ASSIGN_OR_RETURN(cuda::FloatType t, FloatTypeOf(ctx, {&x, &dy, dx}));
  LOOM_ASSIGN_OR_RETURN(RowsByH d, SplitRows(ctx, x.shape()));
  LOOM_ASSIGN_OR_RETURN(const float* scale, OptionalData(ctx, "Scale"));
  const Tensor& mean = ctx.Input("Mean");
  const Tensor& var = ctx.Input("Variance");
  LOOM_RETURN_IF_ERROR(RequireFp32(ctx, "Mean", mean));
  LOOM_RETURN_IF_ERROR(RequireFp32(ctx, "Variance", var));
  LOOM_ASSIGN_OR_RETURN(float* dscale, OptionalOutput(ctx, "Scale@GRAD"));
  LOOM_ASSIGN_OR_RETURN(float* dbias, OptionalOutput(ctx, "Bias@GRAD"));
  std::shared_ptr<void> partial;
  const int64_t partial_bytes =
      2 * cuda::LayerNormGradChunks(d.rows) * d.h * int64_t{sizeof(double)};
  if ((dscale || dbias) && partial_bytes > 0) {
    LOOM_ASSIGN_OR_RETURN(partial, Scratch(ctx, partial_bytes));
  }
  cuda::LaunchLayerNormGrad(t, x.raw_data(), scale, mean.data<float>(), var.data<float>(),
                            dy.raw_data(), dx ? dx->raw_data() : nullptr, dscale, dbias,
                            static_cast<double*>(partial.get()), d.rows, d.h,
                            ctx.Attr<float>("epsilon"), NativeStream(ctx));
  return LastLaunchStatus("layer_norm_grad");
}

}  // namespace

void RegisterLayerNormCudaKernels() {
  auto& r = KernelRegistry::Cuda();
  r.Register("layer_norm", LayerNormKernel, LowPrecision::kNative);
  r.Register("layer_norm_grad", LayerNormGradKernel, LowPrecision::kNative);
}

}  // namespace loom
