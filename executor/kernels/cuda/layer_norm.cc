// CUDA kernels for layer_norm and layer_norm_grad (host side). X is viewed
// as [rows, h] with h the product of the normalized dims.
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

const float* OptionalData(const KernelContext& ctx, const std::string& slot) {
  return ctx.HasInput(slot) ? ctx.Input(slot).data<float>() : nullptr;
}

float* OptionalOutput(const KernelContext& ctx, const std::string& slot) {
  return ctx.HasOutput(slot) ? ctx.Output(slot)->data<float>() : nullptr;
}

Status LayerNormKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  LOOM_ASSIGN_OR_RETURN(RowsByH d, SplitRows(ctx, x.shape()));
  cuda::LaunchLayerNorm(x.data<float>(), OptionalData(ctx, "Scale"), OptionalData(ctx, "Bias"),
                        ctx.Output("Y")->data<float>(), OptionalOutput(ctx, "Mean"),
                        OptionalOutput(ctx, "Variance"), d.rows, d.h, ctx.Attr<float>("epsilon"),
                        NativeStream(ctx));
  return LastLaunchStatus("layer_norm");
}

Status LayerNormGradKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  LOOM_ASSIGN_OR_RETURN(RowsByH d, SplitRows(ctx, x.shape()));
  float* dscale = OptionalOutput(ctx, "Scale@GRAD");
  float* dbias = OptionalOutput(ctx, "Bias@GRAD");
  std::shared_ptr<void> partial;
  const int64_t partial_bytes =
      2 * cuda::LayerNormGradChunks(d.rows) * d.h * int64_t{sizeof(double)};
  if ((dscale || dbias) && partial_bytes > 0) {
    LOOM_ASSIGN_OR_RETURN(partial, Scratch(ctx, partial_bytes));
  }
  cuda::LaunchLayerNormGrad(x.data<float>(), OptionalData(ctx, "Scale"),
                            ctx.Input("Mean").data<float>(), ctx.Input("Variance").data<float>(),
                            ctx.Input("Y@GRAD").data<float>(), OptionalOutput(ctx, "X@GRAD"),
                            dscale, dbias, static_cast<double*>(partial.get()), d.rows, d.h,
                            ctx.Attr<float>("epsilon"), NativeStream(ctx));
  return LastLaunchStatus("layer_norm_grad");
}

}  // namespace

void RegisterLayerNormCudaKernels() {
  auto& r = KernelRegistry::Cuda();
  r.Register("layer_norm", LayerNormKernel);
  r.Register("layer_norm_grad", LayerNormGradKernel);
}

}  // namespace loom
