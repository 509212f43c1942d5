// CPU kernels for matmul and matmul_grad, on OpenBLAS sgemm.
#include <cblas.h>

#include <algorithm>
#include <cstring>

#include "executor/kernels/cpu/cpu_helpers.h"
#include "executor/kernels/kernel_shapes.h"

namespace loom {
namespace {

// Row-major C[m, n] = alpha * op(A) @ op(B), where op(A) is [m, k] and op(B)
// is [k, n]; A is stored [k, m] when ta, B is stored [n, k] when tb.
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, const float* b, float* c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // BLAS rejects a zero leading dimension; the empty sum is zero.
    std::memset(c, 0, sizeof(float) * m * n);
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(ta ? m : k), b, static_cast<int>(tb ? k : n),
              0.0f, c, static_cast<int>(n));
}

// dst[b] = src[b]^T for `batch` row-major [rows, cols] matrices.
void TransposeBatches(const float* src, int64_t batch, int64_t rows,
                      int64_t cols, float* dst) {
  for (int64_t b = 0; b < batch; ++b) {
    const float* s = src + b * rows * cols;
    float* d = dst + b * rows * cols;
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) d[j * rows + i] = s[i * cols + j];
    }
  }
}

Status MatmulKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const Tensor& y = ctx.Input("Y");
  Tensor* out = ctx.Output("Out");
  const bool tx = ctx.Attr<bool>("transpose_x");
  const bool ty = ctx.Attr<bool>("transpose_y");
  const float alpha = ctx.Attr<float>("alpha");
  const MatmulDims d = MatmulDimsOf(x.shape(), y.shape(), tx, ty);
  const float* px = x.data<float>();
  const float* py = y.data<float>();
  float* po = out->data<float>();
  if (!d.y_batched) {
    // A shared Y: the batch folds into the rows of one gemm. A transposed X
    // cannot fold in place, so it is transposed into a buffer first.
    std::vector<float> xt;
    if (tx && d.batch > 1) {
      xt.resize(x.numel());
      TransposeBatches(px, d.batch, d.k, d.m, xt.data());
      Gemm(false, ty, d.batch * d.m, d.n, d.k, alpha, xt.data(), py, po);
    } else {
      Gemm(tx, ty, d.batch * d.m, d.n, d.k, alpha, px, py, po);
    }
    return Status::OK();
  }
  for (int64_t b = 0; b < d.batch; ++b) {
    Gemm(tx, ty, d.m, d.n, d.k, alpha, px + b * d.m * d.k,
         py + b * d.k * d.n, po + b * d.m * d.n);
  }
  return Status::OK();
}

// One batch of the gradient, for X stored as [m, k] (or [k, m] if tx) and Y
// as [k, n] (or [n, k] if ty). Out = alpha * A @ B with A = op(X), B = op(Y)
// gives dA = alpha * dOut @ B^T and dB = alpha * A^T @ dOut; a transposed
// operand's gradient is the transpose of those, which the gemm flags give
// without copies.
void GradX(bool tx, bool ty, int64_t m, int64_t n, int64_t k, float alpha,
           const float* y, const float* dout, float* dx) {
  if (!tx) {
    // dX[m, k] = dOut[m, n] @ op(Y)^T
    Gemm(false, !ty, m, k, n, alpha, dout, y, dx);
  } else {
    // dX[k, m] = op(Y)[k, n] @ dOut^T
    Gemm(ty, true, k, m, n, alpha, y, dout, dx);
  }
}

void GradY(bool tx, bool ty, int64_t m, int64_t n, int64_t k, float alpha,
           const float* x, const float* dout, float* dy) {
  if (!ty) {
    // dY[k, n] = op(X)^T[k, m] @ dOut[m, n]
    Gemm(!tx, false, k, n, m, alpha, x, dout, dy);
  } else {
    // dY[n, k] = dOut^T[n, m] @ op(X)[m, k]
    Gemm(true, tx, n, k, m, alpha, dout, x, dy);
  }
}

Status MatmulGradKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const Tensor& y = ctx.Input("Y");
  const Tensor& dout = ctx.Input("Out@GRAD");
  const bool tx = ctx.Attr<bool>("transpose_x");
  const bool ty = ctx.Attr<bool>("transpose_y");
  const float alpha = ctx.Attr<float>("alpha");
  const MatmulDims d = MatmulDimsOf(x.shape(), y.shape(), tx, ty);
  float* dx = ctx.HasOutput("X@GRAD") ? ctx.Output("X@GRAD")->data<float>()
                                      : nullptr;
  float* dy = ctx.HasOutput("Y@GRAD") ? ctx.Output("Y@GRAD")->data<float>()
                                      : nullptr;
  // Only the operand a gradient needs is read (matmul_grad's SetReadsData):
  // the other may have been freed, or left in a low precision by the shim.
  const float* px = dy ? x.data<float>() : nullptr;
  const float* py = dx ? y.data<float>() : nullptr;
  const float* pg = dout.data<float>();
  if (!d.y_batched) {
    // Work on A = op(X) flattened to [batch * m, k], so that dA and dY are
    // single gemms over the whole batch (dY's sum over the batch is then
    // one reduction in a fixed order, not a sum of per-batch results).
    const int64_t rows = d.batch * d.m;
    if (!tx || d.batch == 1) {
      if (dx) GradX(tx, ty, rows, d.n, d.k, alpha, py, pg, dx);
      if (dy) GradY(tx, ty, rows, d.n, d.k, alpha, px, pg, dy);
      return Status::OK();
    }
    if (dx) {
      std::vector<float> da(x.numel());
      GradX(false, ty, rows, d.n, d.k, alpha, py, pg, da.data());
      TransposeBatches(da.data(), d.batch, d.m, d.k, dx);
    }
    if (dy) {
      std::vector<float> a(x.numel());
      TransposeBatches(px, d.batch, d.k, d.m, a.data());
      GradY(false, ty, rows, d.n, d.k, alpha, a.data(), pg, dy);
    }
    return Status::OK();
  }
  for (int64_t b = 0; b < d.batch; ++b) {
    const int64_t ox = b * d.m * d.k, oy = b * d.k * d.n, oo = b * d.m * d.n;
    if (dx) GradX(tx, ty, d.m, d.n, d.k, alpha, py + oy, pg + oo, dx + ox);
    if (dy) GradY(tx, ty, d.m, d.n, d.k, alpha, px + ox, pg + oo, dy + oy);
  }
  return Status::OK();
}

}  // namespace

void RegisterMatmulCpuKernels() {
  auto& r = KernelRegistry::Cpu();
  r.Register("matmul", MatmulKernel);
  r.Register("matmul_grad", MatmulGradKernel);
}

}  // namespace loom
