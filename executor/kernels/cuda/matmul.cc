// CUDA kernels for matmul and matmul_grad, on cuBLAS (host code only). The
// CPU kernels' algebra (kernels/cpu/matmul.cc), with row-major operands
// given to column-major cuBLAS by the usual swap: row-major C = A @ B is
// column-major C^T = B^T @ A^T, so B goes first and nothing is copied.
// Batches are one strided-batched call; a Y shared by the batch has
// stride 0 there, or folds into the rows of a single gemm.
#include <climits>

#include "executor/kernels/cuda/cuda_kernel_helpers.h"
#include "executor/kernels/kernel_shapes.h"

namespace loom {
namespace {

// `batch` row-major products C[m, n] = alpha * op(A) @ op(B), where op(A)
// is [m, k] and op(B) is [k, n]; A is stored [k, m] when ta, B is stored
// [n, k] when tb; sa, sb, sc are the strides between batches (0: shared).
struct Gemm {
  bool ta, tb;
  int64_t m, n, k;
  const float* a;
  const float* b;
  float* c;
  int64_t batch = 1, sa = 0, sb = 0, sc = 0;
};

Status Run(const KernelContext& ctx, float alpha, const Gemm& g) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return Status::OK();
  if (g.k == 0) {
    // cuBLAS rejects a zero leading dimension; the empty sum is zero.
    return ZeroOnDevice(ctx, g.c, g.batch * g.m * g.n * int64_t{sizeof(float)});
  }
  for (int64_t v : {g.m, g.n, g.k, g.batch}) {
    if (v > INT_MAX) {
      return Unimplemented(ctx.type(), " on CUDA: a gemm dimension of ", v,
                           " is past cuBLAS's int range");
    }
  }
  const float beta = 0.0f;
  const auto* stream = static_cast<CudaStream*>(ctx.stream());
  const int m = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
  const int lda = static_cast<int>(g.ta ? g.m : g.k);
  const int ldb = static_cast<int>(g.tb ? g.k : g.n);
  const cublasOperation_t op_a = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (g.batch == 1) {
    return CublasStatus(cublasSgemm(stream->cublas(), op_b, op_a, n, m, k, &alpha, g.b, ldb, g.a,
                                    lda, &beta, g.c, n),
                        ctx.type() + " sgemm");
  }
  return CublasStatus(
      cublasSgemmStridedBatched(stream->cublas(), op_b, op_a, n, m, k, &alpha, g.b, ldb, g.sb, g.a,
                                lda, g.sa, &beta, g.c, n, g.sc, static_cast<int>(g.batch)),
      ctx.type() + " sgemm (strided batched)");
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
  if (!d.y_batched && (!tx || d.batch == 1)) {
    // A shared Y: the batch folds into the rows of one gemm.
    return Run(ctx, alpha, Gemm{tx, ty, d.batch * d.m, d.n, d.k, px, py, po});
  }
  // Batched, Y either per batch or shared (stride 0).
  return Run(ctx, alpha,
             Gemm{tx, ty, d.m, d.n, d.k, px, py, po, d.batch, d.m * d.k,
                  d.y_batched ? d.k * d.n : 0, d.m * d.n});
}

// The gradients' gemms, as the CPU's GradX/GradY (kernels/cpu/matmul.cc),
// over `batch` batches with strides sx, sy, sg of X, Y and dOut.
struct Batches {
  int64_t batch = 1, sx = 0, sy = 0, sg = 0;
};

Status GradX(const KernelContext& ctx, bool tx, bool ty, int64_t m, int64_t n, int64_t k,
             float alpha, const float* y, const float* dout, float* dx, const Batches& b) {
  if (!tx) {
    // dX[m, k] = dOut[m, n] @ op(Y)^T
    return Run(ctx, alpha, Gemm{false, !ty, m, k, n, dout, y, dx, b.batch, b.sg, b.sy, b.sx});
  }
  // dX[k, m] = op(Y)[k, n] @ dOut^T
  return Run(ctx, alpha, Gemm{ty, true, k, m, n, y, dout, dx, b.batch, b.sy, b.sg, b.sx});
}

Status GradY(const KernelContext& ctx, bool tx, bool ty, int64_t m, int64_t n, int64_t k,
             float alpha, const float* x, const float* dout, float* dy, const Batches& b) {
  if (!ty) {
    // dY[k, n] = op(X)^T[k, m] @ dOut[m, n]
    return Run(ctx, alpha, Gemm{!tx, false, k, n, m, x, dout, dy, b.batch, b.sx, b.sg, b.sy});
  }
  // dY[n, k] = dOut^T[n, m] @ op(X)[m, k]
  return Run(ctx, alpha, Gemm{true, tx, n, k, m, dout, x, dy, b.batch, b.sg, b.sx, b.sy});
}

Status MatmulGradKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const Tensor& y = ctx.Input("Y");
  const Tensor& dout = ctx.Input("Out@GRAD");
  const bool tx = ctx.Attr<bool>("transpose_x");
  const bool ty = ctx.Attr<bool>("transpose_y");
  const float alpha = ctx.Attr<float>("alpha");
  const MatmulDims d = MatmulDimsOf(x.shape(), y.shape(), tx, ty);
  const float* px = x.data<float>();
  const float* py = y.data<float>();
  const float* pg = dout.data<float>();
  float* dx = ctx.HasOutput("X@GRAD") ? ctx.Output("X@GRAD")->data<float>() : nullptr;
  float* dy = ctx.HasOutput("Y@GRAD") ? ctx.Output("Y@GRAD")->data<float>() : nullptr;
  if (d.y_batched) {
    const Batches b{d.batch, d.m * d.k, d.k * d.n, d.m * d.n};
    if (dx) LOOM_RETURN_IF_ERROR(GradX(ctx, tx, ty, d.m, d.n, d.k, alpha, py, pg, dx, b));
    if (dy) LOOM_RETURN_IF_ERROR(GradY(ctx, tx, ty, d.m, d.n, d.k, alpha, px, pg, dy, b));
    return Status::OK();
  }
  // A shared Y: work on A = op(X) flattened to [batch * m, k], so that dY
  // is one gemm over the whole batch (its sum over the batch is one
  // reduction in cuBLAS's fixed order, not a sum of per-batch results).
  const int64_t rows = d.batch * d.m;
  if (!tx || d.batch == 1) {
    if (dx) LOOM_RETURN_IF_ERROR(GradX(ctx, tx, ty, rows, d.n, d.k, alpha, py, pg, dx, {}));
    if (dy) LOOM_RETURN_IF_ERROR(GradY(ctx, tx, ty, rows, d.n, d.k, alpha, px, pg, dy, {}));
    return Status::OK();
  }
  if (dx) {
    // Per batch, against the shared Y (stride 0): no transposes needed.
    const Batches b{d.batch, d.m * d.k, 0, d.m * d.n};
    LOOM_RETURN_IF_ERROR(GradX(ctx, tx, ty, d.m, d.n, d.k, alpha, py, pg, dx, b));
  }
  if (dy) {
    // X is [batch, k, m]: transpose each batch into A [batch, m, k] first.
    LOOM_ASSIGN_OR_RETURN(std::shared_ptr<void> a_mem, Scratch(ctx, x.bytes()));
    float* a = static_cast<float*>(a_mem.get());
    LOOM_ASSIGN_OR_RETURN(cuda::CopyPlan plan, CopyPlanFor({d.batch, d.m, d.k}, {d.k * d.m, 1, d.m},
                                                           {d.m * d.k, d.k, 1}, 0, 0));
    LOOM_RETURN_IF_ERROR(RunCopy(ctx, px, a, plan, sizeof(float), "matmul_grad transpose"));
    LOOM_RETURN_IF_ERROR(GradY(ctx, false, ty, rows, d.n, d.k, alpha, a, pg, dy, {}));
  }
  return Status::OK();
}

}  // namespace

void RegisterMatmulCudaKernels() {
  auto& r = KernelRegistry::Cuda();
  r.Register("matmul", MatmulKernel);
  r.Register("matmul_grad", MatmulGradKernel);
}

}  // namespace loom
