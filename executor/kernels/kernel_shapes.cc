#include "executor/kernels/kernel_shapes.h"

#include <algorithm>

namespace loom {

MatmulDims MatmulDimsOf(const Shape& x, const Shape& y, bool transpose_x, bool transpose_y) {
  const size_t rx = x.size(), ry = y.size();
  MatmulDims d;
  d.batch = NumElements(Shape(x.begin(), x.end() - 2));
  d.m = transpose_x ? x[rx - 1] : x[rx - 2];
  d.k = transpose_x ? x[rx - 2] : x[rx - 1];
  d.n = transpose_y ? y[ry - 2] : y[ry - 1];
  d.y_batched = ry > 2;
  return d;
}

std::vector<Shape> SplitShapes(const KernelContext& ctx, const Tensor& x, int axis) {
  const int num = ctx.Attr<int32_t>("num");
  std::vector<int64_t> sizes = ctx.Attr<std::vector<int64_t>>("sections");
  const int64_t dim = x.dim(axis);
  if (num > 0) {
    sizes.assign(num, dim / num);
  } else {
    int64_t known = 0;
    for (int64_t s : sizes) known += s == -1 ? 0 : s;
    for (int64_t& s : sizes) {
      if (s == -1) s = dim - known;
    }
  }
  std::vector<Shape> shapes;
  for (int64_t size : sizes) {
    shapes.push_back(x.shape());
    shapes.back()[axis] = size;
  }
  return shapes;
}

std::vector<int64_t> SliceStarts(const KernelContext& ctx, const Shape& x) {
  const auto axes = ctx.Attr<std::vector<int32_t>>("axes");
  const auto starts = ctx.Attr<std::vector<int64_t>>("starts");
  std::vector<int64_t> begin(x.size(), 0);
  const int rank = static_cast<int>(x.size());
  for (size_t k = 0; k < axes.size(); ++k) {
    // Shape inference has validated the attributes.
    const int axis = axes[k] < 0 ? axes[k] + rank : axes[k];
    int64_t s = starts[k] < 0 ? starts[k] + x[axis] : starts[k];
    begin[axis] = std::min(std::max<int64_t>(s, 0), x[axis]);
  }
  return begin;
}

float DropoutKeptScale(const KernelContext& ctx) {
  const float p = ctx.Attr<float>("dropout_prob");
  return ctx.Attr<bool>("is_test") ? 1.0f : 1.0f / (1.0f - p);
}

StatusOr<DropoutRowLayout> DropoutRowLayoutOf(const KernelContext& ctx, const Tensor& x) {
  const Shape& shape = x.shape();
  DropoutRowLayout l;
  l.rows = shape.empty() ? 1 : shape[0];
  l.local = Shape(shape.empty() ? shape.begin() : shape.begin() + 1, shape.end());
  const size_t row_dims = l.local.size();
  std::vector<int64_t> full = ctx.Attr<std::vector<int64_t>>("full_shape");
  std::vector<int64_t> offsets = ctx.Attr<std::vector<int64_t>>("shard_offsets");
  if (full.empty()) full = l.local;
  if (offsets.empty()) offsets.assign(row_dims, 0);
  if (full.size() != row_dims || offsets.size() != row_dims) {
    return InvalidArgument("full_shape ", ShapeToString(full), " and shard_offsets ",
                           ShapeToString(offsets), " do not fit X ", MetaToString(x.meta()));
  }
  l.stride.resize(row_dims);
  for (int64_t d = static_cast<int64_t>(row_dims) - 1, s = 1; d >= 0; --d) {
    if (offsets[d] < 0 || offsets[d] > full[d] - l.local[d]) {
      return InvalidArgument("X ", MetaToString(x.meta()), " at shard_offsets ",
                             ShapeToString(offsets), " reaches past full_shape ",
                             ShapeToString(full));
    }
    l.stride[d] = s;
    l.first += offsets[d] * s;
    s *= full[d];
  }
  return l;
}

}  // namespace loom
