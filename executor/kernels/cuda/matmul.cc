// CUDA kernels for matmul and matmul_grad, on cuBLAS (host code only). The
// CPU kernels' algebra (kernels/cpu/matmul.cc), with row-major operands
// given to column-major cuBLAS by the usual swap: row-major C = A @ B is
// column-major C^T = B^T @ A^T, so B goes first and nothing is copied.
// Batches are one strided-batched call; a Y shared by the batch has
// stride 0 there, or folds into the rows of a single gemm.
//
// fp32 runs on cublasSgemm(StridedBatched). bf16 and fp16 run on
// cublasGemmEx / cublasGemmStridedBatchedEx with A, B and C all of the
// op's dtype and CUBLAS_COMPUTE_32F: products and sums in fp32, alpha and
// beta fp32, C rounded once to its dtype, as the CPU computes them
// (widened to fp32, sgemm, rounded: executor/fp32_shim.h). cuBLAS sums in
// its own order, so a result may differ from the CPU's by an ulp of its
// dtype.
#include <climits>

#include "executor/kernels/cuda/cuda_kernel_helpers.h"
#include "executor/kernels/kernel_shapes.h"

namespace loom {
namespace {

// `batch` row-major products C[m, n] = alpha * op(A) @ op(B), where op(A)
// is [m, k] and op(B) is [k, n]; A is stored [k, m] when ta, B is stored
// [n, k] when tb; sa, sb, sc are the strides between batches (0: shared),
// in elements. A, B and C are all of the gemm's float type.
struct Gemm {
  bool ta, tb;
  int64_t m, n, k;
  const void* a;
  const void* b;
  void* c;
  int64_t batch = 1, sa = 0, sb = 0, sc = 0;
};

// cuBLAS's name for a 16-bit float type.
cudaDataType_t CublasTypeOf(cuda::FloatType t) {
  return t == cuda::kBf16 ? CUDA_R_16BF : CUDA_R_16F;
}

Status Run(const KernelContext& ctx, cuda::FloatType t, float alpha, const Gemm& g) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return Status::OK();
  if (g.k == 0) {
    // cuBLAS rejects a zero leading dimension; the empty sum is zero.
    return ZeroOnDevice(ctx, g.c, g.batch * g.m * g.n * SizeOf(static_cast<DataType>(t)));
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
  if (t == cuda::kFp32) {
    const auto* a = static_cast<const float*>(g.a);
    const auto* b = static_cast<const float*>(g.b);
    auto* c = static_cast<float*>(g.c);
    if (g.batch == 1) {
      return CublasStatus(
          cublasSgemm(stream->cublas(), op_b, op_a, n, m, k, &alpha, b, ldb, a, lda, &beta, c, n),
          ctx.type() + " sgemm");
    }
    return CublasStatus(
        cublasSgemmStridedBatched(stream->cublas(), op_b, op_a, n, m, k, &alpha, b, ldb, g.sb, a,
                                  lda, g.sa, &beta, c, n, g.sc, static_cast<int>(g.batch)),
        ctx.type() + " sgemm (strided batched)");
  }
  const cudaDataType_t type = CublasTypeOf(t);
  if (g.batch == 1) {
    return CublasStatus(cublasGemmEx(stream->cublas(), op_b, op_a, n, m, k, &alpha, g.b, type, ldb,
                                     g.a, type, lda, &beta, g.c, type, n, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT),
                        ctx.type() + " gemm (" + DataTypeName(static_cast<DataType>(t)) + ")");
  }
  return CublasStatus(
      cublasGemmStridedBatchedEx(stream->cublas(), op_b, op_a, n, m, k, &alpha, g.b, type, ldb,
                                 g.sb, g.a, type, lda, g.sa, &beta, g.c, type, n, g.sc,
                                 static_cast<int>(g.batch), CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT),
      ctx.type() + " gemm (" + DataTypeName(static_cast<DataType>(t)) + ", strided batched)");
}

Status MatmulKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const Tensor& y = ctx.Input("Y");
  Tensor* out = ctx.Output("Out");
  LOOM_ASSIGN_OR_RETURN(cuda::FloatType t, FloatTypeOf(ctx, {&x, &y, out}));
  const bool tx = ctx.Attr<bool>("transpose_x");
  const bool ty = ctx.Attr<bool>("transpose_y");
  const float alpha = ctx.Attr<float>("alpha");
  const MatmulDims d = MatmulDimsOf(x.shape(), y.shape(), tx, ty);
  const void* px = x.raw_data();
  const void* py = y.raw_data();
  void* po = out->raw_data();
  if (!d.y_batched && (!tx || d.batch == 1)) {
    // A shared Y: the batch folds into the rows of one gemm.
    return Run(ctx, t, alpha, Gemm{tx, ty, d.batch * d.m, d.n, d.k, px, py, po});
  }
  // Batched, Y either per batch or shared (stride 0).
  return Run(ctx, t, alpha,
             Gemm{tx, ty, d.m, d.n, d.k, px, py, po, d.batch, d.m * d.k,
                  d.y_batched ? d.k * d.n : 0, d.m * d.n});
}

// The gradients' gemms, as the CPU's GradX/GradY (kernels/cpu/matmul.cc),
// over `batch` batches with strides sx, sy, sg of X, Y and dOut.
struct Batches {
  int64_t batch = 1, sx = 0, sy = 0, sg = 0;
};

// The float type and alpha of one op's gemms.
struct GemmType {
  cuda::FloatType t;
  float alpha;
};

Status GradX(const KernelContext& ctx, const GemmType& gt, bool tx, bool ty, int64_t m, int64_t n,
             int64_t k, const void* y, const void* dout, void* dx, const Batches& b) {
  if (!tx) {
    // dX[m, k] = dOut[m, n] @ op(Y)^T
    return Run(ctx, gt.t, gt.alpha,
               Gemm{false, !ty, m, k, n, dout, y, dx, b.batch, b.sg, b.sy, b.sx});
  }
  // dX[k, m] = op(Y)[k, n] @ dOut^T
  return Run(ctx, gt.t, gt.alpha, Gemm{ty, true, k, m, n, y, dout, dx, b.batch, b.sy, b.sg, b.sx});
}

Status GradY(const KernelContext& ctx, const GemmType& gt, bool tx, bool ty, int64_t m, int64_t n,
             int64_t k, const void* x, const void* dout, void* dy, const Batches& b) {
  if (!ty) {
    // dY[k, n] = op(X)^T[k, m] @ dOut[m, n]
    return Run(ctx, gt.t, gt.alpha,
               Gemm{!tx, false, k, n, m, x, dout, dy, b.batch, b.sx, b.sg, b.sy});
  }
  // dY[n, k] = dOut^T[n, m] @ op(X)[m, k]
  return Run(ctx, gt.t, gt.alpha, Gemm{true, tx, n, k, m, dout, x, dy, b.batch, b.sg, b.sx, b.sy});
}

Status MatmulGradKernel(const KernelContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const Tensor& y = ctx.Input("Y");
  const Tensor& dout = ctx.Input("Out@GRAD");
  Tensor* dx_t = ctx.HasOutput("X@GRAD") ? ctx.Output("X@GRAD") : nullptr;
  Tensor* dy_t = ctx.HasOutput("Y@GRAD") ? ctx.Output("Y@GRAD") : nullptr;
  LOOM_ASSIGN_OR_RETURN(cuda::FloatType t, FloatTypeOf(ctx, {&x, &y, &dout, dx_t, dy_t}));
  const bool tx = ctx.Attr<bool>("transpose_x");
  const bool ty = ctx.Attr<bool>("transpose_y");
  const GemmType gt{t, ctx.Attr<float>("alpha")};
  const MatmulDims d = MatmulDimsOf(x.shape(), y.shape(), tx, ty);
  // Only the operand a gradient needs is read (matmul_grad's SetReadsData).
  const void* px = dy_t ? x.raw_data() : nullptr;
  const void* py = dx_t ? y.raw_data() : nullptr;
  const void* pg = dout.raw_data();
  void* dx = dx_t ? dx_t->raw_data() : nullptr;
  void* dy = dy_t ? dy_t->raw_data() : nullptr;
  if (d.y_batched) {
    const Batches b{d.batch, d.m * d.k, d.k * d.n, d.m * d.n};
    if (dx) LOOM_RETURN_IF_ERROR(GradX(ctx, gt, tx, ty, d.m, d.n, d.k, py, pg, dx, b));
    if (dy) LOOM_RETURN_IF_ERROR(GradY(ctx, gt, tx, ty, d.m, d.n, d.k, px, pg, dy, b));
    return Status::OK();
  }
  // A shared Y: work on A = op(X) flattened to [batch * m, k], so that dY
  // is one gemm over the whole batch (its sum over the batch is one
  // reduction in cuBLAS's fixed order, not a sum of per-batch results).
  const int64_t rows = d.batch * d.m;
  if (!tx || d.batch == 1) {
    if (dx) LOOM_RETURN_IF_ERROR(GradX(ctx, gt, tx, ty, rows, d.n, d.k, py, pg, dx, {}));
    if (dy) LOOM_RETURN_IF_ERROR(GradY(ctx, gt, tx, ty, rows, d.n, d.k, px, pg, dy, {}));
    return Status::OK();
  }
  if (dx) {
    // Per batch, against the shared Y (stride 0): no transposes needed.
    const Batches b{d.batch, d.m * d.k, 0, d.m * d.n};
    LOOM_RETURN_IF_ERROR(GradX(ctx, gt, tx, ty, d.m, d.n, d.k, py, pg, dx, b));
  }
  if (dy) {
    // X is [batch, k, m]: transpose each batch into A [batch, m, k] first.
    LOOM_ASSIGN_OR_RETURN(std::shared_ptr<void> a_mem, Scratch(ctx, x.bytes()));
    void* a = a_mem.get();
    LOOM_ASSIGN_OR_RETURN(cuda::CopyPlan plan, CopyPlanFor({d.batch, d.m, d.k}, {d.k * d.m, 1, d.m},
                                                           {d.m * d.k, d.k, 1}, 0, 0));
    LOOM_RETURN_IF_ERROR(RunCopy(ctx, px, a, plan, static_cast<int>(SizeOf(x.dtype())),
                                 "matmul_grad transpose"));
    LOOM_RETURN_IF_ERROR(GradY(ctx, gt, false, ty, rows, d.n, d.k, a, pg, dy, {}));
  }
  return Status::OK();
}

}  // namespace

void RegisterMatmulCudaKernels() {
  auto& r = KernelRegistry::Cuda();
  r.Register("matmul", MatmulKernel, LowPrecision::kNative);
  r.Register("matmul_grad", MatmulGradKernel, LowPrecision::kNative);
}

}  // namespace loom
