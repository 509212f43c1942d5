// What a kernel computes, apart from the device it computes on: the shapes
// and index layouts both backends derive from an op's attributes and
// inputs, with the checks of what indexes memory. kernels/cpu/ and
// kernels/cuda/ read them from here, so that the two cannot drift apart.
#ifndef LOOM_EXECUTOR_KERNELS_KERNEL_SHAPES_H_
#define LOOM_EXECUTOR_KERNELS_KERNEL_SHAPES_H_

#include <cstdint>
#include <vector>

#include "executor/kernel.h"

namespace loom {

// matmul: X [..., m, k] (or [..., k, m] transposed) times Y [k, n] or
// [..., k, n] (transposed likewise).
struct MatmulDims {
  int64_t batch;  // product of X's leading dims
  int64_t m, k, n;
  bool y_batched;  // Y has X's batch dims; else Y is 2-D and shared
};
MatmulDims MatmulDimsOf(const Shape& x, const Shape& y, bool transpose_x, bool transpose_y);

// split: the shapes of the parts of `x` along `axis`, as shape inference
// computed them from the op's num or sections (a pruned part has no
// tensor to read its shape from).
std::vector<Shape> SplitShapes(const KernelContext& ctx, const Tensor& x, int axis);

// slice: where the slice starts in each dim of `x` (the extents are the
// output's), from the op's axes and starts.
std::vector<int64_t> SliceStarts(const KernelContext& ctx, const Shape& x);

// dropout: 1 / (1 - p) for the kept elements in training, 1 in a test.
float DropoutKeptScale(const KernelContext& ctx);

// dropout: where each element of X lies in the logical full row its mask
// is drawn from (the op's full_shape and shard_offsets). Dim 0 of X is the
// rows; a scalar is one row of one element.
struct DropoutRowLayout {
  int64_t rows = 1;
  Shape local;                  // a row of X
  std::vector<int64_t> stride;  // of the full row, per local dim
  int64_t first = 0;            // full-row index of the local row's first element
};
// InvalidArgument where the shard attributes do not fit X (they index
// memory).
StatusOr<DropoutRowLayout> DropoutRowLayoutOf(const KernelContext& ctx, const Tensor& x);

}  // namespace loom

#endif  // LOOM_EXECUTOR_KERNELS_KERNEL_SHAPES_H_
