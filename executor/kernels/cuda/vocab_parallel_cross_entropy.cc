#include "executor/kernels/cuda/vocab_parallel_cross_entropy.h"

#include "executor/kernels/cuda/cuda_kernel_helpers.h"

namespace loom {

Status VocabParallelCrossEntropyCuda(const KernelContext& ctx, const ShardReduceFn& reduce) {
  const int nranks = ctx.Attr<int32_t>("nranks");
  if (nranks > 1 && !reduce) {
    return Unimplemented("c_softmax_with_cross_entropy over ", nranks,
                         " ranks needs a communicator");
  }
  const Tensor& logits = ctx.Input("Logits");
  const Tensor& label = ctx.Input("Label");
  const int64_t v = logits.shape().back();
  const int64_t begin = ctx.Attr<int32_t>("rank") * v;
  const int64_t classes = nranks * v;
  const int64_t rows = label.numel();
  const int64_t ignore = ctx.Attr<int32_t>("ignore_index");
  LOOM_RETURN_IF_ERROR(CheckLabels(ctx, label, classes, ignore));
  if (ctx.device() == nullptr) {
    return FailedPrecondition(ctx.type(), ": a CUDA kernel needs its device");
  }
  // The rows the shards reduce: maxima in FP32, sums in FP64 (as on the CPU).
  Tensor mx, sum, target;
  LOOM_RETURN_IF_ERROR(mx.Resize(TensorMeta{proto::FP32, {rows}}, ctx.device(), ctx.stream()));
  LOOM_RETURN_IF_ERROR(sum.Resize(TensorMeta{proto::FP64, {rows}}, ctx.device(), ctx.stream()));
  LOOM_RETURN_IF_ERROR(target.Resize(TensorMeta{proto::FP64, {rows}}, ctx.device(), ctx.stream()));
  const cudaStream_t s = NativeStream(ctx);
  const float* px = logits.data<float>();
  const int64_t* pl = label.data<int64_t>();
  // 1. Row maxima, reduced to the global maxima.
  cuda::LaunchShardRowMax(px, mx.data<float>(), rows, v, s);
  LOOM_RETURN_IF_ERROR(LastLaunchStatus(ctx.type()));
  if (nranks > 1) {
    LOOM_RETURN_IF_ERROR(ctx.stream()->Synchronize());
    LOOM_RETURN_IF_ERROR(reduce({&mx}, /*max=*/true));
  }
  // 2. Sums of exp(x - max), and 3. the target logit from the shard that
  // holds the label (zero elsewhere): both summed across the shards.
  cuda::LaunchShardRowSums(px, pl, mx.data<float>(), sum.data<double>(), target.data<double>(),
                           rows, v, begin, ignore, s);
  LOOM_RETURN_IF_ERROR(LastLaunchStatus(ctx.type()));
  if (nranks > 1) {
    LOOM_RETURN_IF_ERROR(ctx.stream()->Synchronize());
    LOOM_RETURN_IF_ERROR(reduce({&sum, &target}, /*max=*/false));
  }
  // Every rank now has each row's global log-sum-exp.
  cuda::LaunchShardFinish(px, pl, mx.data<float>(), sum.data<double>(), target.data<double>(),
                          ctx.Output("Softmax")->data<float>(), ctx.Output("Loss")->data<float>(),
                          rows, v, classes, ignore, s);
  return LastLaunchStatus(ctx.type());
}

}  // namespace loom
