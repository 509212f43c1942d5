// CPU kernels for reduce_sum / reduce_mean and their gradients.
#include "executor/kernels/cpu/cpu_helpers.h"
#include "framework/ops/op_helpers.h"

namespace loom {
namespace {

// X's shape with the reduced dims set to 1.
StatusOr<Shape> KeptShape(const KernelContext& ctx, const Shape& x) {
  LOOM_ASSIGN_OR_RETURN(
      auto dims, NormalizeReduceDims(ctx.Attr<std::vector<int32_t>>("dims"),
                                     ctx.Attr<bool>("reduce_all"),
                                     static_cast<int>(x.size())));
  Shape kept = x;
  for (int d : dims) kept[d] = 1;
  return kept;
}

Status Reduce(const KernelContext& ctx, bool mean) {
  const Tensor& x = ctx.Input("X");
  Tensor* out = ctx.Output("Out");
  LOOM_ASSIGN_OR_RETURN(Shape kept, KeptShape(ctx, x.shape()));
  // Accumulate in double, in row-major order: precise and reproducible.
  std::vector<double> acc(out->numel(), 0.0);
  const float* px = x.data<float>();
  std::vector<int64_t> zero(x.shape().size(), 0);
  ForEachBroadcast(x.shape(), BroadcastStrides(kept, x.shape()), zero,
                   [&](int64_t i, int64_t a, int64_t) { acc[a] += px[i]; });
  const double scale =
      mean ? static_cast<double>(out->numel()) / x.numel() : 1.0;
  float* po = out->data<float>();
  for (size_t i = 0; i < acc.size(); ++i) po[i] = static_cast<float>(acc[i] * scale);
  return Status::OK();
}

Status ReduceGrad(const KernelContext& ctx, bool mean) {
  const Tensor& x = ctx.Input("X");  // meta only
  const Tensor& dout = ctx.Input("Out@GRAD");
  Tensor* dx = ctx.Output("X@GRAD");
  LOOM_ASSIGN_OR_RETURN(Shape kept, KeptShape(ctx, x.shape()));
  const float scale =
      mean ? static_cast<float>(static_cast<double>(dout.numel()) / x.numel())
           : 1.0f;
  const float* pg = dout.data<float>();
  float* p = dx->data<float>();
  std::vector<int64_t> zero(x.shape().size(), 0);
  ForEachBroadcast(x.shape(), BroadcastStrides(kept, x.shape()), zero,
                   [&](int64_t i, int64_t a, int64_t) { p[i] = pg[a] * scale; });
  return Status::OK();
}

Status ReduceSumKernel(const KernelContext& ctx) { return Reduce(ctx, false); }
Status ReduceMeanKernel(const KernelContext& ctx) { return Reduce(ctx, true); }
Status ReduceSumGradKernel(const KernelContext& ctx) {
  return ReduceGrad(ctx, false);
}
Status ReduceMeanGradKernel(const KernelContext& ctx) {
  return ReduceGrad(ctx, true);
}

}  // namespace

void RegisterReduceCpuKernels() {
  auto& r = KernelRegistry::Cpu();
  r.Register("reduce_sum", ReduceSumKernel);
  r.Register("reduce_mean", ReduceMeanKernel);
  r.Register("reduce_sum_grad", ReduceSumGradKernel);
  r.Register("reduce_mean_grad", ReduceMeanGradKernel);
}

}  // namespace loom
