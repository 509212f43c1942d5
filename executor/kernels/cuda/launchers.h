// The CUDA kernels' launchers, in plain types only, so that nvcc compiles
// nothing of Loom's beyond this header (and framework/counter_rng.h and
// framework/lr_schedule.h, whose functions run on the device too). The
// host side (kernels/cuda/*.cc) unpacks a KernelContext, calls these on
// the op's stream and turns cudaGetLastError into a Status. Every launcher
// enqueues and returns; none synchronizes. All sizes are element counts.
//
// Float tensors come as void pointers with their FloatType: fp32, fp16 or
// bf16. The kernels load them into float, compute in float and round to
// nearest even once on every store of a 16-bit output (dtype_access.cuh),
// as the CPU kernels do through executor/fp32_shim.h. Pointers typed float
// are fp32 whatever the op's dtype (layer norm's affine parameters and
// statistics, accumulators, the learning rate, and the optimizers and
// cross entropies, which stay fp32-only).
#ifndef LOOM_EXECUTOR_KERNELS_CUDA_LAUNCHERS_H_
#define LOOM_EXECUTOR_KERNELS_CUDA_LAUNCHERS_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "framework/lr_schedule.h"

namespace loom {
namespace cuda {

// Index spaces walked by the strided kernels carry at most this many dims
// (after the host folds contiguous ones together).
constexpr int kMaxDims = 8;

// Blocks for n items at `block` threads a block, clamped: the kernels loop
// grid-stride, so a clamped grid still covers every item.
constexpr int kBlock = 256;
inline unsigned GridFor(int64_t n, int block = kBlock) {
  const int64_t blocks = (n + block - 1) / block;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 ? 65535 : blocks));
}

// The storage types of float tensors, with proto::DataType's values
// (checked in cuda_kernel_helpers.cc, which maps dtypes to these).
enum FloatType : int { kFp32 = 0, kFp16 = 1, kBf16 = 2 };

// cast.cu. False for a pair it does not convert.
bool LaunchCast(FloatType from, const void* x, FloatType to, void* out, int64_t n,
                cudaStream_t s);

// grad_norm.cu. squared_l2_norm: AddSquares adds x[0, n)'s squares to
// *sum (a device double) through kNormBlocks partial sums in `partial`,
// summed in block order, so reruns are bit-identical; StoreSum rounds *sum
// into *out. grad_scale: framework/grad_scale.h; loss_scale may be null.
constexpr int kNormBlocks = 128;
void LaunchClearSum(double* sum, cudaStream_t s);
void LaunchAddSquares(const float* x, int64_t n, double* partial, double* sum, cudaStream_t s);
void LaunchStoreSum(const double* sum, float* out, cudaStream_t s);
void LaunchGradScale(const float* squared, const float* loss_scale, float max_norm, float* scale,
                     float* norm, cudaStream_t s);
// update_loss_scale: framework/grad_scale.h; outputs may alias inputs.
void LaunchUpdateLossScale(const float* squared, int64_t growth_interval, const float* scale,
                           const int64_t* good, float* scale_out, int64_t* good_out,
                           cudaStream_t s);

// lr_schedule.cu: *lr = the rate after *step completed steps; *step_out =
// *step + 1 (may be step).
void LaunchLrSchedule(const LrScheduleParams& params, const int64_t* step, float* lr,
                      int64_t* step_out, cudaStream_t s);

// activation.cu: x, out, dout and dx of type t.
void LaunchGelu(FloatType t, const void* x, void* out, int64_t n, bool approximate,
                cudaStream_t s);
void LaunchGeluGrad(FloatType t, const void* x, const void* dout, void* dx, int64_t n,
                    bool approximate, cudaStream_t s);
void LaunchRelu(FloatType t, const void* x, void* out, int64_t n, cudaStream_t s);
void LaunchReluGrad(FloatType t, const void* out, const void* dout, void* dx, int64_t n,
                    cudaStream_t s);

// elementwise.cu
enum BinaryOp : int { kAdd = 0, kSub = 1, kMul = 2, kScaleX = 3 };
// out[i] = op(x[a], y[b]) for out element i with coordinates c (row-major
// over `shape`), a = sum c[d] * sx[d], b = sum c[d] * sy[d]. kScaleX
// ignores y and gives x[a] * scale.
struct BroadcastIndex {
  int rank = 0;
  int64_t shape[kMaxDims];
  int64_t sx[kMaxDims];
  int64_t sy[kMaxDims];
};
// `index` null: x, y and out share one shape. All of type t.
void LaunchBinary(FloatType t, BinaryOp op, const void* x, const void* y, void* out, int64_t n,
                  const BroadcastIndex* index, float scale, cudaStream_t s);
void LaunchScale(FloatType t, const void* x, void* out, int64_t n, float scale, float bias,
                 cudaStream_t s);
// out[i] = carry[i] + in[0][i] + in[1][i] + ..., left to right in float
// (no carry: from in[0][i]); out may alias any input. The inputs are of
// the launch's input type; carry, a running sum over earlier inputs, is
// fp32. A carry takes one of the kMaxSumInputs places.
constexpr int kMaxSumInputs = 8;
struct SumInputs {
  const float* carry = nullptr;
  int count = 0;  // inputs in `in`
  const void* in[kMaxSumInputs];
};
// out_type is in_type, or kFp32 (a running sum kept unrounded).
void LaunchSum(FloatType in_type, const SumInputs& inputs, FloatType out_type, void* out,
               int64_t n, cudaStream_t s);

// A reduction of g (contiguous over a full space) onto `kept` targets:
// target t (row-major over the kept dims) sums g[...] * f[...] over the
// reduced dims in row-major order. f is optional (null: 1).
struct ReducePlan {
  int kept_rank = 0;
  int64_t kept_shape[kMaxDims];
  int64_t kept_g[kMaxDims];  // strides into g
  int64_t kept_f[kMaxDims];  // strides into f
  int red_rank = 0;
  int64_t red_shape[kMaxDims];
  int64_t red_g[kMaxDims];
  int64_t red_f[kMaxDims];
  int64_t kept_count = 0;
  int64_t red_count = 0;
};
// How a plan is summed; its shapes alone decide, so a rerun takes the same
// path and gives the same bits. kSerial: a thread per target walks its
// summands in row-major order (the CPU's order exactly); kTree: a block
// per target over contiguous summands, then a fixed tree; kChunked: a
// thread per (chunk of kReduceChunk summands, target), adjacent threads on
// adjacent targets (coalesced column sums), then the chunks in order.
enum class ReduceMode { kSerial, kTree, kChunked };
constexpr int64_t kReduceChunk = 64;
ReduceMode ReduceModeOf(const ReducePlan& plan);
// Device scratch LaunchReduce needs, in bytes (0: none).
int64_t ReduceScratchBytes(const ReducePlan& plan, bool in_double);
// out[t] = acc * scale, accumulated in double where `in_double` (else in
// float); g, f and out of type t (the sums are of their float values).
void LaunchReduce(FloatType t, const ReducePlan& plan, const void* g, const void* f, void* out,
                  double scale, bool in_double, void* scratch, cudaStream_t s);

// Validation of index tensors (ids, labels): the first position i with
// v[i] != skip (when has_skip) and v[i] outside [lo, hi) goes to *first,
// which the launcher sets to UINT64_MAX first (none).
void LaunchFirstOutOfRange(const int64_t* v, int64_t n, int64_t lo, int64_t hi, bool has_skip,
                           int64_t skip, unsigned long long* first, cudaStream_t s);

// shape.cu: dst[dst_offset + sum c[d] * dst_stride[d]] =
// src[src_offset + sum c[d] * src_stride[d]] over `shape`; elem_size is
// 1, 2, 4 or 8 bytes.
struct CopyPlan {
  int rank = 0;
  int64_t shape[kMaxDims];
  int64_t src_stride[kMaxDims];
  int64_t dst_stride[kMaxDims];
  int64_t src_offset = 0;
  int64_t dst_offset = 0;
};
void LaunchStridedCopy(const void* src, void* dst, const CopyPlan& plan, int elem_size,
                       cudaStream_t s);

// dropout.cu. X is [rows, local...]; an element's draw is keyed by its
// row and its index j in the logical full row: j = first + sum idx[d] *
// full_stride[d] over the local dims.
struct DropoutPlan {
  int64_t rows = 0;
  int64_t row_len = 0;
  int dims = 0;
  int64_t local[kMaxDims];
  int64_t full_stride[kMaxDims];
  int64_t first = 0;
  uint64_t step_key = 0;
  int64_t row_offset = 0;
  float p = 0.0f;
  float scale = 1.0f;
};
// x, out, dout and dx of type t; mask and out are each optional (pruned
// outputs).
void LaunchDropout(FloatType t, const DropoutPlan& plan, const void* x, bool* mask, void* out,
                   cudaStream_t s);
// pass-through: mask all true, out = x (its bits).
void LaunchDropoutPass(FloatType t, const void* x, bool* mask, void* out, int64_t n,
                       cudaStream_t s);
void LaunchDropoutGrad(FloatType t, const bool* mask, const void* dout, void* dx, int64_t n,
                       float scale, cudaStream_t s);

// embedding.cu. Rows of `row_bytes` bytes; a row is start == -1 ? id :
// id - start when in [0, vocab); other ids and `padding` give zeros.
void LaunchLookupTable(const void* table, const int64_t* ids, void* out, int64_t n,
                       int64_t row_bytes, int64_t start, int64_t vocab, int64_t padding,
                       cudaStream_t s);
// dw (fp32, zeroed here) += the rows of dout (type t), each column
// summed in float over the ids in order. A low-precision dW is this sum
// rounded once (embedding.cc casts it).
void LaunchLookupTableGrad(FloatType t, const void* dout, const int64_t* ids, float* dw, int64_t n,
                           int64_t h, int64_t start, int64_t vocab, int64_t padding,
                           cudaStream_t s);

// fill.cu: `value` stored as type t (rounded once).
void LaunchFillFloat(FloatType t, void* out, int64_t n, float value, cudaStream_t s);
void LaunchFillInt64(int64_t* out, int64_t n, int64_t value, cudaStream_t s);
void LaunchFillInt32(int32_t* out, int64_t n, int32_t value, cudaStream_t s);

// layer_norm.cu: X as [rows, h]; scale, bias, mean and var optional.
// x, y, dy and dx of type t; scale, bias, the statistics and their
// gradients fp32 whatever t is (AMP keeps them so).
void LaunchLayerNorm(FloatType t, const void* x, const float* scale, const float* bias, void* y,
                     float* mean, float* var, int64_t rows, int64_t h, double eps,
                     cudaStream_t s);
// dscale/dbias: column sums in double, over chunks of rows into
// `partial` (2 * ChunksOf(rows) * h doubles) then across the chunks.
int64_t LayerNormGradChunks(int64_t rows);
void LaunchLayerNormGrad(FloatType t, const void* x, const float* scale, const float* mean,
                         const float* var, const void* dy, void* dx, float* dscale, float* dbias,
                         double* partial, int64_t rows, int64_t h, double eps, cudaStream_t s);

// optimizer.cu: fp32 only (AMP keeps the master weights and moments
// fp32). The scalars (lr, beta pows) are read on the device.
// grad_scale: the device scalar the gradient is multiplied by (GradScale),
// or nullptr; not finite: the update is skipped, outputs keep their inputs.
void LaunchSgd(const float* param, const float* grad, const float* lr, const float* grad_scale,
               float* out, int64_t n, cudaStream_t s);
struct AdamWArgs {
  float beta1, beta2, epsilon, weight_decay;
  const float* lr;
  const float* grad_scale;  // as LaunchSgd's
  const float* beta1_pow;
  const float* beta2_pow;
  float* beta1_pow_out;
  float* beta2_pow_out;
};
void LaunchAdamW(const AdamWArgs& a, const float* param, const float* grad, const float* m,
                 const float* v, float* param_out, float* m_out, float* v_out, int64_t n,
                 cudaStream_t s);

// softmax.cu: X as [outer, n, inner] around the axis; causal (inner == 1)
// rows see the first min(n, row % sq + n - sq + 1) entries. x, y, dy and
// dx of type t.
void LaunchSoftmax(FloatType t, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
                   bool causal, int64_t sq, cudaStream_t s);
void LaunchSoftmaxGrad(FloatType t, const void* y, const void* dy, void* dx, int64_t outer,
                       int64_t n, int64_t inner, cudaStream_t s);
// The cross entropies are fp32 only: AMP keeps the loss in fp32.
// Cross entropy over rows of v logits holding classes [begin, begin + v)
// of `classes` (one rank: begin 0, classes v). Labels are valid (checked).
void LaunchCrossEntropy(const float* logits, const int64_t* label, float* softmax, float* loss,
                        int64_t rows, int64_t v, int64_t begin, int64_t classes, int64_t ignore,
                        cudaStream_t s);
void LaunchCrossEntropyGrad(const float* softmax, const int64_t* label, const float* dloss,
                            float* dlogits, int64_t rows, int64_t v, int64_t begin, int64_t ignore,
                            cudaStream_t s);

// The vocabulary-parallel cross entropy in three steps, with the
// reductions across the shards between them (vocab_parallel_cross_entropy
// .cc): each row's maximum (-inf for v == 0); each row's sum of
// exp(x - max) and the label's logit where this shard holds it (0
// elsewhere), both in double; then Softmax and Loss from the reduced rows.
void LaunchShardRowMax(const float* logits, float* mx, int64_t rows, int64_t v, cudaStream_t s);
void LaunchShardRowSums(const float* logits, const int64_t* label, const float* mx, double* sum,
                        double* target, int64_t rows, int64_t v, int64_t begin, int64_t ignore,
                        cudaStream_t s);
void LaunchShardFinish(const float* logits, const int64_t* label, const float* mx,
                       const double* sum, const double* target, float* softmax, float* loss,
                       int64_t rows, int64_t v, int64_t classes, int64_t ignore, cudaStream_t s);

}  // namespace cuda
}  // namespace loom

#endif  // LOOM_EXECUTOR_KERNELS_CUDA_LAUNCHERS_H_
