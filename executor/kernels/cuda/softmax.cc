// CUDA kernels for softmax, softmax_with_cross_entropy and
// c_softmax_with_cross_entropy (on one rank), and their gradients (host
// side). Labels are checked as on the CPU (kernels/cpu/softmax.cc), which
// waits for the stream once per op: the error has to reach the host.
// Softmax runs on fp32, bf16 and fp16; the cross entropies stay fp32-only
// (kWidened): AMP keeps the loss in fp32, and their schemas want fp32
// logits.
#include "executor/kernels/cuda/cuda_kernel_helpers.h"
#include "executor/kernels/cuda/vocab_parallel_cross_entropy.h"
#include "framework/ops/op_helpers.h"

namespace loom {
namespace {

// X viewed as [outer, n, inner] around the softmax axis.
struct AxisSplit {
  int64_t outer, n, inner;
};

StatusOr<AxisSplit> SplitAtAxis(const KernelContext& ctx, const Shape& x) {
  LOOM_ASSIGN_OR_RETURN(int axis,
                        NormalizeAxis(ctx.Attr<int32_t>("axis"), static_cast<int>(x.size())));
  return AxisSplit{NumElements(Shape(x.begin(), x.begin() + axis)), x[axis],
                   NumElements(Shape(x.begin() + axis + 1, x.end()))};
}

Status SoftmaxKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  Tensor* out = ctx.Output("Out");
  LOOM_ASSIGN_OR_RETURN(cuda::FloatType t, FloatTypeOf(ctx, {&x, out}));
  LOOM_ASSIGN_OR_RETURN(AxisSplit d, SplitAtAxis(ctx, x.shape()));
  const bool causal = ctx.Attr<bool>("causal");
  // Causal rows run over the last dim of [..., Sq, Sk] (inner == 1).
  const int64_t sq = causal ? x.shape()[x.shape().size() - 2] : 1;
  cuda::LaunchSoftmax(t, x.raw_data(), out->raw_data(), d.outer, d.n, d.inner, causal, sq,
                      NativeStream(ctx));
  return LastLaunchStatus("softmax");
}

Status SoftmaxGradKernel(const KernelContext& ctx) {
  const Tensor& out = ctx.Input("Out");
  const Tensor& dout = ctx.Input("Out@GRAD");
  Tensor* dx = ctx.Output("X@GRAD");
  LOOM_ASSIGN_OR_RETURN(cuda::FloatType t, FloatTypeOf(ctx, {&out, &dout, dx}));
  LOOM_ASSIGN_OR_RETURN(AxisSplit d, SplitAtAxis(ctx, out.shape()));
  cuda::LaunchSoftmaxGrad(t, out.raw_data(), dout.raw_data(), dx->raw_data(), d.outer, d.n,
                          d.inner, NativeStream(ctx));
  return LastLaunchStatus("softmax_grad");
}

// The columns of a vocabulary-parallel op's shard: this rank holds global
// classes [begin, begin + v) of `classes`.
struct VocabShard {
  int64_t v, begin, classes;
};

VocabShard ShardOf(const KernelContext& ctx, int64_t v) {
  const int64_t nranks = ctx.Attr<int32_t>("nranks");
  const int64_t rank = ctx.Attr<int32_t>("rank");
  return VocabShard{v, rank * v, nranks * v};
}

Status CrossEntropy(const KernelContext& ctx, const VocabShard& shard) {
  const Tensor& logits = ctx.Input("Logits");
  const Tensor& label = ctx.Input("Label");
  const int64_t ignore = ctx.Attr<int32_t>("ignore_index");
  LOOM_RETURN_IF_ERROR(CheckLabels(ctx, label, shard.classes, ignore));
  cuda::LaunchCrossEntropy(logits.data<float>(), label.data<int64_t>(),
                           ctx.Output("Softmax")->data<float>(), ctx.Output("Loss")->data<float>(),
                           label.numel(), shard.v, shard.begin, shard.classes, ignore,
                           NativeStream(ctx));
  return LastLaunchStatus(ctx.type());
}

Status CrossEntropyGrad(const KernelContext& ctx, const VocabShard& shard) {
  const Tensor& sm = ctx.Input("Softmax");
  const Tensor& label = ctx.Input("Label");
  const int64_t ignore = ctx.Attr<int32_t>("ignore_index");
  LOOM_RETURN_IF_ERROR(CheckLabels(ctx, label, shard.classes, ignore));
  cuda::LaunchCrossEntropyGrad(sm.data<float>(), label.data<int64_t>(),
                               ctx.Input("Loss@GRAD").data<float>(),
                               ctx.Output("Logits@GRAD")->data<float>(), label.numel(), shard.v,
                               shard.begin, ignore, NativeStream(ctx));
  return LastLaunchStatus(ctx.type());
}

Status CrossEntropyKernel(const KernelContext& ctx) {
  const int64_t v = ctx.Input("Logits").shape().back();
  return CrossEntropy(ctx, VocabShard{v, 0, v});
}

Status CrossEntropyGradKernel(const KernelContext& ctx) {
  const int64_t v = ctx.Input("Softmax").shape().back();
  return CrossEntropyGrad(ctx, VocabShard{v, 0, v});
}

// The vocabulary-parallel algorithm with its reductions the identity, as
// on the CPU; over several ranks the communication kernels call it with
// theirs (vocab_parallel_cross_entropy.h).
Status CShardCrossEntropyKernel(const KernelContext& ctx) {
  return VocabParallelCrossEntropyCuda(ctx, nullptr);
}

// No communication: each rank's shard of dLogits is local.
Status CShardCrossEntropyGradKernel(const KernelContext& ctx) {
  return CrossEntropyGrad(ctx, ShardOf(ctx, ctx.Input("Softmax").shape().back()));
}

}  // namespace

// The CPU's error for the first label that is neither a class nor
// ignore_index.
Status CheckLabels(const KernelContext& ctx, const Tensor& label, int64_t classes, int64_t ignore) {
  int64_t value = 0;
  LOOM_ASSIGN_OR_RETURN(int64_t row, FirstOutOfRange(ctx, label.data<int64_t>(), label.numel(), 0,
                                                     classes, /*has_skip=*/true, ignore, &value));
  if (row < 0) return Status::OK();
  return InvalidArgument("Label[", row, "] = ", value, " is out of range [0, ", classes, ")");
}

void RegisterSoftmaxCudaKernels() {
  auto& r = KernelRegistry::Cuda();
  r.Register("softmax", SoftmaxKernel, LowPrecision::kNative);
  r.Register("softmax_grad", SoftmaxGradKernel, LowPrecision::kNative);
  r.Register("softmax_with_cross_entropy", CrossEntropyKernel);
  r.Register("softmax_with_cross_entropy_grad", CrossEntropyGradKernel);
  r.Register("c_softmax_with_cross_entropy", CShardCrossEntropyKernel);
  r.Register("c_softmax_with_cross_entropy_grad", CShardCrossEntropyGradKernel);
}

}  // namespace loom
