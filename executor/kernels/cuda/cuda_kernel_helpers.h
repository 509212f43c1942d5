// Host helpers shared by the CUDA kernels (kernels/cuda/*.cc): the op's
// stream, the launchers' storage type of a dtype, scratch memory, device
// copies, and the index plans (launchers.h) built from shapes with
// contiguous dims folded together.
#ifndef LOOM_EXECUTOR_KERNELS_CUDA_CUDA_KERNEL_HELPERS_H_
#define LOOM_EXECUTOR_KERNELS_CUDA_CUDA_KERNEL_HELPERS_H_

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "executor/cuda/cuda_status.h"
#include "executor/cuda/cuda_stream.h"
#include "executor/device.h"
#include "executor/kernel.h"
#include "executor/kernels/cuda/launchers.h"

namespace loom {

// The cudaStream_t the op runs on.
cudaStream_t NativeStream(const KernelContext& ctx);

// The launchers' storage type of a dtype kernels compute on (fp32, bf16,
// fp16: IsComputeFloat), which `dtype` must be.
cuda::FloatType FloatTypeOf(DataType dtype);
// The storage type of tensors a kernel reads or writes as one type (null
// ones skipped), or the error a user gets where they are of another dtype
// (an int64 X of elementwise_add, say) or of different ones.
StatusOr<cuda::FloatType> FloatTypeOf(const KernelContext& ctx,
                                      std::initializer_list<const Tensor*> tensors);

// Stream-ordered scratch for the op: drop it once its work is enqueued.
StatusOr<std::shared_ptr<void>> Scratch(const KernelContext& ctx, int64_t bytes);

// Device-to-device copy on the op's stream; nothing when src == dst.
Status CopyOnDevice(const KernelContext& ctx, void* dst, const void* src, int64_t bytes);
Status ZeroOnDevice(const KernelContext& ctx, void* dst, int64_t bytes);

// The first i in [0, n) with v[i] outside [lo, hi) (and, if has_skip,
// v[i] != skip), or -1; its value in *value. Waits for the stream: the
// kernels' validation errors need the answer on the host.
StatusOr<int64_t> FirstOutOfRange(const KernelContext& ctx, const int64_t* v, int64_t n, int64_t lo,
                                  int64_t hi, bool has_skip, int64_t skip, int64_t* value);

// Element strides of a row-major (contiguous) shape.
std::vector<int64_t> ContiguousStrides(const Shape& shape);

// Drops size-1 dims and merges neighbours whose strides compose in every
// stride vector, so that fewer dims are walked.
void FoldDims(Shape* shape, const std::vector<std::vector<int64_t>*>& strides);

// out[i] over `out` from x and y broadcast to it (cpu_helpers.h strides).
StatusOr<cuda::BroadcastIndex> BroadcastIndexFor(const Shape& out, const Shape& x, const Shape& y);

// Sums g (contiguous, shape `full`) times f (shape `factor`, broadcast to
// full; ignored when null) onto `target` (broadcast to full): the device
// form of cpu_helpers' ReduceToShape, in the same order per target.
StatusOr<cuda::ReducePlan> ReducePlanFor(const Shape& full, const Shape& target,
                                         const Shape* factor);

// A copy over `shape` with the given strides and offsets, folded.
StatusOr<cuda::CopyPlan> CopyPlanFor(Shape shape, std::vector<int64_t> src_stride,
                                     std::vector<int64_t> dst_stride, int64_t src_offset,
                                     int64_t dst_offset);

// Runs a copy plan: one memcpy where it folds to one contiguous run.
Status RunCopy(const KernelContext& ctx, const void* src, void* dst, const cuda::CopyPlan& plan,
               int elem_size, const std::string& what);

// The CPU kernels' error for the first label neither in [0, classes) nor
// ignore_index (softmax.cc); waits for the stream.
Status CheckLabels(const KernelContext& ctx, const Tensor& label, int64_t classes, int64_t ignore);

// dropout's plan (dropout.cc): the CPU kernel's checks of the shard
// attributes, and the keys of X's rows and elements.
StatusOr<cuda::DropoutPlan> DropoutPlanFor(const KernelContext& ctx, const Tensor& x);

}  // namespace loom

#endif  // LOOM_EXECUTOR_KERNELS_CUDA_CUDA_KERNEL_HELPERS_H_
