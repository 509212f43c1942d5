// CPU kernels for squared_l2_norm, grad_scale and update_loss_scale (framework/grad_clip.h).
// fp32 inputs only: registered kWidened, so bf16/fp16 gradients arrive as
// exact fp32 copies.
#include "executor/kernels/cpu/cpu_helpers.h"
#include "framework/grad_clip.h"
#include "framework/grad_scale.h"

namespace loom {
namespace {

Status SquaredL2NormKernel(const KernelContext& ctx) {
  std::vector<int64_t> sizes;
  for (int i = 0; i < ctx.InputCount("X"); ++i) sizes.push_back(ctx.Input("X", i).numel());
  LOOM_ASSIGN_OR_RETURN(const std::vector<NormRange> ranges,
                        LocalNormRanges(ctx.desc(), sizes, ctx.run().ring_index));
  double sum = 0;
  for (const NormRange& r : ranges) {
    const float* x = ctx.Input("X", r.input).data<float>();
    for (int64_t i = r.begin; i < r.end; ++i) sum += double{x[i]} * x[i];
  }
  ctx.Output("Out")->data<float>()[0] = static_cast<float>(sum);
  return Status::OK();
}

Status GradScaleKernel(const KernelContext& ctx) {
  const float loss_scale =
      ctx.HasInput("LossScale") ? ctx.Input("LossScale").data<float>()[0] : 1.0f;
  const GradScaleResult r = GradScaleOf(ctx.Input("SquaredNorm").data<float>()[0], loss_scale,
                                        ctx.Attr<float>("max_norm"));
  ctx.Output("Scale")->data<float>()[0] = r.scale;
  if (ctx.HasOutput("Norm")) ctx.Output("Norm")->data<float>()[0] = r.norm;
  return Status::OK();
}

Status UpdateLossScaleKernel(const KernelContext& ctx) {
  float scale = ctx.Input("LossScale").data<float>()[0];
  int64_t good = ctx.Input("GoodSteps").data<int64_t>()[0];
  UpdateLossScale(ctx.Input("SquaredNorm").data<float>()[0],
                  ctx.Attr<int64_t>("growth_interval"), &scale, &good);
  ctx.Output("LossScaleOut")->data<float>()[0] = scale;
  ctx.Output("GoodStepsOut")->data<int64_t>()[0] = good;
  return Status::OK();
}

}  // namespace

void RegisterGradNormCpuKernels() {
  auto& r = KernelRegistry::Cpu();
  r.Register("squared_l2_norm", SquaredL2NormKernel, LowPrecision::kWidened);
  r.Register("grad_scale", GradScaleKernel);
  r.Register("update_loss_scale", UpdateLossScaleKernel);
}

}  // namespace loom
