// CPU kernels for softmax, softmax_with_cross_entropy and
// c_softmax_with_cross_entropy (on one rank), and their gradients.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "executor/kernels/cpu/cpu_helpers.h"
#include "executor/kernels/cpu/vocab_parallel_cross_entropy.h"
#include "framework/ops/op_helpers.h"

namespace loom {
namespace {

// X viewed as [outer, n, inner] around the softmax axis.
struct AxisSplit {
  int64_t outer, n, inner;
};

StatusOr<AxisSplit> SplitAtAxis(const KernelContext& ctx, const Shape& x) {
  LOOM_ASSIGN_OR_RETURN(
      int axis,
      NormalizeAxis(ctx.Attr<int32_t>("axis"), static_cast<int>(x.size())));
  return AxisSplit{NumElements(Shape(x.begin(), x.begin() + axis)), x[axis],
                   NumElements(Shape(x.begin() + axis + 1, x.end()))};
}

// How many leading entries of softmax row `row` are unmasked. Causal rows
// run over the last dim of [..., Sq, Sk]: query q sees keys k <= q + Sk - Sq
// (shape inference guarantees Sq <= Sk, so at least one).
int64_t VisibleKeys(bool causal, const Shape& shape, int64_t row, int64_t n) {
  if (!causal) return n;
  const int64_t sq = shape[shape.size() - 2];
  const int64_t q = row % sq;
  return std::min(n, q + (n - sq) + 1);
}

Status SoftmaxKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  LOOM_ASSIGN_OR_RETURN(AxisSplit d, SplitAtAxis(ctx, x.shape()));
  const bool causal = ctx.Attr<bool>("causal");
  const float* px = x.data<float>();
  float* py = ctx.Output("Out")->data<float>();
  if (x.numel() == 0) return Status::OK();
  for (int64_t o = 0; o < d.outer; ++o) {
    for (int64_t i = 0; i < d.inner; ++i) {
      const int64_t base = o * d.n * d.inner + i;
      const float* xr = px + base;
      float* yr = py + base;
      const int64_t s = d.inner;
      // Causal implies inner == 1, so the row index is `o`.
      const int64_t visible = VisibleKeys(causal, x.shape(), o, d.n);
      float mx = xr[0];
      for (int64_t j = 1; j < visible; ++j) mx = std::max(mx, xr[j * s]);
      double sum = 0.0;
      for (int64_t j = 0; j < visible; ++j) {
        const float e = std::exp(xr[j * s] - mx);
        yr[j * s] = e;
        sum += e;
      }
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t j = 0; j < visible; ++j) yr[j * s] *= inv;
      for (int64_t j = visible; j < d.n; ++j) yr[j * s] = 0.0f;
    }
  }
  return Status::OK();
}

// dX = Out * (dOut - sum(dOut * Out)); masked entries have Out = 0 and so
// get no gradient.
Status SoftmaxGradKernel(const KernelContext& ctx) {
  const Tensor& out = ctx.Input("Out");
  LOOM_ASSIGN_OR_RETURN(AxisSplit d, SplitAtAxis(ctx, out.shape()));
  const float* py = out.data<float>();
  const float* pg = ctx.Input("Out@GRAD").data<float>();
  float* dx = ctx.Output("X@GRAD")->data<float>();
  const int64_t s = d.inner;
  for (int64_t o = 0; o < d.outer; ++o) {
    for (int64_t i = 0; i < d.inner; ++i) {
      const int64_t base = o * d.n * d.inner + i;
      double dot = 0.0;
      for (int64_t j = 0; j < d.n; ++j) {
        dot += double{pg[base + j * s]} * py[base + j * s];
      }
      const float fdot = static_cast<float>(dot);
      for (int64_t j = 0; j < d.n; ++j) {
        const int64_t k = base + j * s;
        dx[k] = py[k] * (pg[k] - fdot);
      }
    }
  }
  return Status::OK();
}

// True for a row that takes part in the loss; an error for a label that is
// neither a class nor ignore_index.
StatusOr<bool> CheckLabel(const int64_t* label, int64_t row, int64_t classes,
                          int64_t ignore_index) {
  const int64_t l = label[row];
  if (l == ignore_index) return false;
  if (l < 0 || l >= classes) {
    return InvalidArgument("Label[", row, "] = ", l, " is out of range [0, ",
                           classes, ")");
  }
  return true;
}

Status CrossEntropyKernel(const KernelContext& ctx) {
  const Tensor& logits = ctx.Input("Logits");
  const Tensor& label = ctx.Input("Label");
  const int64_t v = logits.shape().back();
  const int64_t rows = label.numel();
  const int64_t ignore = ctx.Attr<int32_t>("ignore_index");
  const float* px = logits.data<float>();
  const int64_t* pl = label.data<int64_t>();
  float* psm = ctx.Output("Softmax")->data<float>();
  float* ploss = ctx.Output("Loss")->data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    LOOM_ASSIGN_OR_RETURN(bool counted, CheckLabel(pl, r, v, ignore));
    if (v == 0) {  // only ignored rows get here
      ploss[r] = 0.0f;
      continue;
    }
    const float* xr = px + r * v;
    float* sr = psm + r * v;
    // log-sum-exp around the max, so neither exp overflows nor the log of
    // a tiny probability underflows.
    float mx = xr[0];
    for (int64_t j = 1; j < v; ++j) mx = std::max(mx, xr[j]);
    double sum = 0.0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(double{xr[j]} - mx);
    const double lse = mx + std::log(sum);
    for (int64_t j = 0; j < v; ++j) {
      sr[j] = static_cast<float>(std::exp(xr[j] - lse));
    }
    ploss[r] = counted ? static_cast<float>(lse - xr[pl[r]]) : 0.0f;
  }
  return Status::OK();
}

// dLogits = dLoss * (Softmax - onehot(Label)), zero on ignored rows.
Status CrossEntropyGradKernel(const KernelContext& ctx) {
  const Tensor& sm = ctx.Input("Softmax");
  const Tensor& label = ctx.Input("Label");
  const int64_t v = sm.shape().back();
  const int64_t rows = label.numel();
  const int64_t ignore = ctx.Attr<int32_t>("ignore_index");
  const float* psm = sm.data<float>();
  const int64_t* pl = label.data<int64_t>();
  const float* pg = ctx.Input("Loss@GRAD").data<float>();
  float* dx = ctx.Output("Logits@GRAD")->data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    LOOM_ASSIGN_OR_RETURN(bool counted, CheckLabel(pl, r, v, ignore));
    float* dr = dx + r * v;
    if (!counted) {
      std::fill(dr, dr + v, 0.0f);
      continue;
    }
    const float* sr = psm + r * v;
    const float g = pg[r];
    for (int64_t j = 0; j < v; ++j) dr[j] = g * sr[j];
    dr[pl[r]] -= g;
  }
  return Status::OK();
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

Status CShardCrossEntropyKernel(const KernelContext& ctx) {
  return VocabParallelCrossEntropy(ctx, nullptr);
}

// dLogits = dLoss * (Softmax - onehot(Label - begin)), the onehot only where
// the label is in this rank's shard; zero on ignored rows. No communication.
Status CShardCrossEntropyGradKernel(const KernelContext& ctx) {
  const Tensor& sm = ctx.Input("Softmax");
  const Tensor& label = ctx.Input("Label");
  const VocabShard shard = ShardOf(ctx, sm.shape().back());
  const int64_t v = shard.v;
  const int64_t rows = label.numel();
  const int64_t ignore = ctx.Attr<int32_t>("ignore_index");
  const float* psm = sm.data<float>();
  const int64_t* pl = label.data<int64_t>();
  const float* pg = ctx.Input("Loss@GRAD").data<float>();
  float* dx = ctx.Output("Logits@GRAD")->data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    LOOM_ASSIGN_OR_RETURN(bool counted,
                          CheckLabel(pl, r, shard.classes, ignore));
    float* dr = dx + r * v;
    if (!counted) {
      std::fill(dr, dr + v, 0.0f);
      continue;
    }
    const float* sr = psm + r * v;
    const float g = pg[r];
    for (int64_t j = 0; j < v; ++j) dr[j] = g * sr[j];
    const int64_t local = pl[r] - shard.begin;
    if (local >= 0 && local < v) dr[local] -= g;
  }
  return Status::OK();
}

}  // namespace

// The multi-rank algorithm with its three reductions; with one rank they
// are the identity and the arithmetic is softmax_with_cross_entropy's, in
// the same order, so the results match it exactly.
Status VocabParallelCrossEntropy(const KernelContext& ctx, const ShardReduceFn& reduce) {
  const int nranks = ctx.Attr<int32_t>("nranks");
  if (nranks > 1 && !reduce) {
    return Unimplemented("c_softmax_with_cross_entropy over ", nranks,
                         " ranks needs a communicator");
  }
  const Tensor& logits = ctx.Input("Logits");
  const Tensor& label = ctx.Input("Label");
  const VocabShard shard = ShardOf(ctx, logits.shape().back());
  const int64_t v = shard.v;
  const int64_t rows = label.numel();
  const int64_t ignore = ctx.Attr<int32_t>("ignore_index");
  const float* px = logits.data<float>();
  const int64_t* pl = label.data<int64_t>();
  std::vector<char> counted(rows);
  for (int64_t r = 0; r < rows; ++r) {
    LOOM_ASSIGN_OR_RETURN(bool c, CheckLabel(pl, r, shard.classes, ignore));
    counted[r] = c;
  }
  // 1. Row maxima, reduced to the global maxima.
  Tensor mx_t(TensorMeta{proto::FP32, {rows}});
  float* mx = mx_t.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = px + r * v;
    mx[r] = v > 0 ? xr[0] : -std::numeric_limits<float>::infinity();
    for (int64_t j = 1; j < v; ++j) mx[r] = std::max(mx[r], xr[j]);
  }
  if (nranks > 1) LOOM_RETURN_IF_ERROR(reduce({&mx_t}, /*max=*/true));
  // 2. Sums of exp(x - max), and 3. the target logit from the shard that
  // holds the label (zero elsewhere): both summed across the shards.
  Tensor sum_t(TensorMeta{proto::FP64, {rows}});
  Tensor target_t(TensorMeta{proto::FP64, {rows}});
  double* sum = sum_t.data<double>();
  double* target = target_t.data<double>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = px + r * v;
    sum[r] = 0.0;
    for (int64_t j = 0; j < v; ++j) sum[r] += std::exp(double{xr[j]} - mx[r]);
    const int64_t local = pl[r] - shard.begin;
    target[r] = counted[r] && local >= 0 && local < v ? xr[local] : 0.0;
  }
  if (nranks > 1) LOOM_RETURN_IF_ERROR(reduce({&sum_t, &target_t}, /*max=*/false));
  // Every rank now has each row's global log-sum-exp.
  float* psm = ctx.Output("Softmax")->data<float>();
  float* ploss = ctx.Output("Loss")->data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    if (shard.classes == 0) {  // no classes anywhere: only ignored rows
      ploss[r] = 0.0f;
      continue;
    }
    const float* xr = px + r * v;
    float* sr = psm + r * v;
    const double lse = mx[r] + std::log(sum[r]);
    for (int64_t j = 0; j < v; ++j) sr[j] = static_cast<float>(std::exp(xr[j] - lse));
    ploss[r] = counted[r] ? static_cast<float>(lse - target[r]) : 0.0f;
  }
  return Status::OK();
}

void RegisterSoftmaxCpuKernels() {
  auto& r = KernelRegistry::Cpu();
  r.Register("softmax", SoftmaxKernel);
  r.Register("softmax_grad", SoftmaxGradKernel);
  r.Register("softmax_with_cross_entropy", CrossEntropyKernel);
  r.Register("softmax_with_cross_entropy_grad", CrossEntropyGradKernel);
  r.Register("c_softmax_with_cross_entropy", CShardCrossEntropyKernel);
  r.Register("c_softmax_with_cross_entropy_grad", CShardCrossEntropyGradKernel);
}

}  // namespace loom
