#include "executor/tensor.h"

#include <cstdlib>
#include <cstring>

namespace loom {
namespace {

std::shared_ptr<void> Allocate(int64_t bytes) {
  constexpr int64_t kAlign = 64;
  int64_t rounded = ((bytes + kAlign - 1) / kAlign) * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
  CHECK(p != nullptr) << "out of memory allocating " << bytes << " bytes";
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

}  // namespace

void Tensor::Resize(const TensorMeta& meta) {
  // Already that meta: keep the storage (and any view) as it is.
  if (storage_ != nullptr && meta_ == meta) return;
  int64_t need = NumElements(meta.shape) * SizeOf(meta.dtype);
  meta_ = meta;
  if (storage_ != nullptr && capacity_ == need && offset_ == 0) return;
  storage_ = Allocate(need);
  offset_ = 0;
  capacity_ = need;
}

void Tensor::Reshape(const Shape& shape) {
  CHECK_EQ(NumElements(shape), numel());
  meta_.shape = shape;
}

void Tensor::Free() {
  storage_.reset();
  offset_ = 0;
  capacity_ = 0;
}

Tensor Tensor::View(int64_t offset, const Shape& shape) const {
  CHECK_LE(offset + NumElements(shape), numel());
  Tensor t;
  t.meta_ = TensorMeta{meta_.dtype, shape};
  t.storage_ = storage_;
  t.offset_ = offset_ + offset * SizeOf(meta_.dtype);
  t.capacity_ = 0;
  return t;
}

void Tensor::CopyFrom(const Tensor& src) {
  if (storage_ == src.storage_ && offset_ == src.offset_) {
    meta_ = src.meta_;
    return;
  }
  Resize(src.meta());
  std::memcpy(raw_data(), src.raw_data(), bytes());
}

std::vector<float> Tensor::ToFloatVector() const {
  std::vector<float> out(numel());
  if (dtype() == proto::FP32) {
    std::memcpy(out.data(), raw_data(), bytes());
  } else if (dtype() == proto::INT64) {
    const int64_t* p = data<int64_t>();
    for (int64_t i = 0; i < numel(); ++i) out[i] = static_cast<float>(p[i]);
  } else {
    LOG(FATAL) << "ToFloatVector of " << DataTypeName(dtype());
  }
  return out;
}

std::vector<int64_t> Tensor::ToInt64Vector() const {
  const int64_t* p = data<int64_t>();
  return std::vector<int64_t>(p, p + numel());
}

Tensor MakeTensor(const Shape& shape, const std::vector<float>& values) {
  Tensor t(TensorMeta{proto::FP32, shape});
  CHECK_EQ(static_cast<int64_t>(values.size()), t.numel());
  std::memcpy(t.raw_data(), values.data(), t.bytes());
  return t;
}

Tensor MakeTensor(const Shape& shape, const std::vector<int64_t>& values) {
  Tensor t(TensorMeta{proto::INT64, shape});
  CHECK_EQ(static_cast<int64_t>(values.size()), t.numel());
  std::memcpy(t.raw_data(), values.data(), t.bytes());
  return t;
}

}  // namespace loom
