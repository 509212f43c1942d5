// A dense tensor: a meta (dtype, shape) over a shared, 64-byte aligned
// buffer in host memory, or in a device's (Resize with a Device). Several
// tensors may view one buffer at different offsets, which is how flat
// parameter buffers hand out per-parameter views. The element accessors
// give device pointers for a device's tensor; only the host helpers
// (CopyFrom, To*Vector) insist on host memory.
#ifndef LOOM_EXECUTOR_TENSOR_H_
#define LOOM_EXECUTOR_TENSOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "executor/stream.h"
#include "framework/low_precision.h"
#include "framework/status.h"
#include "framework/types.h"

namespace loom {

class Device;

template <typename T>
struct DataTypeOf;
template <> struct DataTypeOf<float> { static constexpr DataType kValue = proto::FP32; };
template <> struct DataTypeOf<double> { static constexpr DataType kValue = proto::FP64; };
template <> struct DataTypeOf<int32_t> { static constexpr DataType kValue = proto::INT32; };
template <> struct DataTypeOf<int64_t> { static constexpr DataType kValue = proto::INT64; };
template <> struct DataTypeOf<bool> { static constexpr DataType kValue = proto::BOOL; };
template <> struct DataTypeOf<bfloat16> { static constexpr DataType kValue = proto::BF16; };
template <> struct DataTypeOf<float16> { static constexpr DataType kValue = proto::FP16; };

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(const TensorMeta& meta) { Resize(meta); }

  const TensorMeta& meta() const { return meta_; }
  DataType dtype() const { return meta_.dtype; }
  const Shape& shape() const { return meta_.shape; }
  int64_t dim(int i) const { return meta_.shape.at(i); }
  int rank() const { return static_cast<int>(meta_.shape.size()); }
  int64_t numel() const { return NumElements(meta_.shape); }
  int64_t bytes() const { return numel() * SizeOf(meta_.dtype); }
  bool initialized() const { return storage_ != nullptr; }

  // Gives the tensor `meta`, allocating new storage unless the current
  // buffer (owned, not a view) is already exactly that many bytes. Contents
  // are unspecified afterwards.
  void Resize(const TensorMeta& meta);
  // As Resize, in `device`'s memory ordered on `stream` (device.h).
  Status Resize(const TensorMeta& meta, Device* device, Stream* stream);
  // Same meta, but the data stays; only the shape changes (reshape).
  void Reshape(const Shape& shape);
  // Drops the storage (the meta stays, for error messages).
  void Free();

  // A tensor that aliases `numel(shape)` elements of this one starting at
  // element `offset`.
  Tensor View(int64_t offset, const Shape& shape) const;
  // Makes this tensor alias `other` entirely (meta included).
  void ShareDataWith(const Tensor& other) { *this = other; }

  template <typename T>
  T* data() {
    CHECK_EQ(meta_.dtype, DataTypeOf<T>::kValue) << "tensor is " << DataTypeName(meta_.dtype);
    CHECK(storage_ != nullptr) << "tensor has no storage";
    return reinterpret_cast<T*>(static_cast<uint8_t*>(storage_.get()) + offset_);
  }
  template <typename T>
  const T* data() const {
    return const_cast<Tensor*>(this)->data<T>();
  }
  // Where the storage lives (kCpu: the host).
  DeviceType device_type() const { return device_type_; }
  const std::shared_ptr<void>& storage() const { return storage_; }
  // Where the tensor starts in its storage, in bytes.
  int64_t byte_offset() const { return offset_; }
  // Points the tensor at `storage` on `type`, at the same offset: for
  // moving a buffer and every view of it to another device at once
  // (device_placement.h). The storage must hold the same bytes' span.
  void Rehome(std::shared_ptr<void> storage, DeviceType type) {
    storage_ = std::move(storage);
    device_type_ = type;
  }

  void* raw_data() {
    return static_cast<uint8_t*>(storage_.get()) + offset_;
  }
  const void* raw_data() const {
    return static_cast<const uint8_t*>(storage_.get()) + offset_;
  }

  // Copies data and meta from `src` into storage owned by this tensor.
  void CopyFrom(const Tensor& src);
  // Elements as float (from fp32, bf16, fp16 or int64) / int64, for tests
  // and printing.
  std::vector<float> ToFloatVector() const;
  std::vector<int64_t> ToInt64Vector() const;

 private:
  TensorMeta meta_;
  std::shared_ptr<void> storage_;
  int64_t offset_ = 0;    // bytes
  int64_t capacity_ = 0;  // bytes owned; 0 for a view
  DeviceType device_type_ = DeviceType::kCpu;
};

// Helpers for tests and data loaders.
Tensor MakeTensor(const Shape& shape, const std::vector<float>& values);
Tensor MakeTensor(const Shape& shape, const std::vector<int64_t>& values);
// `values` in `dtype` (fp32, bf16 or fp16), rounded to nearest even.
Tensor MakeTensor(DataType dtype, const Shape& shape, const std::vector<float>& values);

}  // namespace loom

#endif  // LOOM_EXECUTOR_TENSOR_H_
