#include "executor/tensor.h"

#include <cstring>

#include "executor/cpu/cpu_device.h"

namespace loom {

void Tensor::Resize(const TensorMeta& meta) {
  // Already that meta: keep the storage (and any view) as it is.
  if (storage_ != nullptr && meta_ == meta && device_type_ == DeviceType::kCpu) return;
  int64_t need = NumElements(meta.shape) * SizeOf(meta.dtype);
  meta_ = meta;
  if (storage_ != nullptr && capacity_ == need && offset_ == 0 &&
      device_type_ == DeviceType::kCpu) {
    return;
  }
  storage_ = AllocateHostMemory(need);
  CHECK(storage_ != nullptr) << "out of memory allocating " << need << " bytes";
  offset_ = 0;
  capacity_ = need;
  device_type_ = DeviceType::kCpu;
}

Status Tensor::Resize(const TensorMeta& meta, Device* device, Stream* stream) {
  const DeviceType type = device->type();
  if (storage_ != nullptr && meta_ == meta && device_type_ == type) return Status::OK();
  const int64_t need = NumElements(meta.shape) * SizeOf(meta.dtype);
  meta_ = meta;
  if (storage_ != nullptr && capacity_ == need && offset_ == 0 && device_type_ == type) {
    return Status::OK();
  }
  storage_.reset();  // back to the device before asking again
  LOOM_ASSIGN_OR_RETURN(storage_, device->Allocate(need, stream));
  offset_ = 0;
  capacity_ = need;
  device_type_ = type;
  return Status::OK();
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
  t.device_type_ = device_type_;
  return t;
}

void Tensor::CopyFrom(const Tensor& src) {
  CHECK(src.device_type_ == DeviceType::kCpu) << "CopyFrom of a device tensor";
  if (storage_ == src.storage_ && offset_ == src.offset_) {
    meta_ = src.meta_;
    return;
  }
  Resize(src.meta());
  std::memcpy(raw_data(), src.raw_data(), bytes());
}

std::vector<float> Tensor::ToFloatVector() const {
  CHECK(device_type_ == DeviceType::kCpu) << "ToFloatVector of a device tensor";
  std::vector<float> out(numel());
  if (IsComputeFloat(dtype())) {
    WidenToFloat(dtype(), raw_data(), numel(), out.data());
  } else if (dtype() == proto::INT64) {
    const int64_t* p = data<int64_t>();
    for (int64_t i = 0; i < numel(); ++i) out[i] = static_cast<float>(p[i]);
  } else {
    LOG(FATAL) << "ToFloatVector of " << DataTypeName(dtype());
  }
  return out;
}

std::vector<int64_t> Tensor::ToInt64Vector() const {
  CHECK(device_type_ == DeviceType::kCpu) << "ToInt64Vector of a device tensor";
  const int64_t* p = data<int64_t>();
  return std::vector<int64_t>(p, p + numel());
}

Tensor MakeTensor(const Shape& shape, const std::vector<float>& values) {
  Tensor t(TensorMeta{proto::FP32, shape});
  CHECK_EQ(static_cast<int64_t>(values.size()), t.numel());
  std::memcpy(t.raw_data(), values.data(), t.bytes());
  return t;
}

Tensor MakeTensor(DataType dtype, const Shape& shape, const std::vector<float>& values) {
  Tensor t(TensorMeta{dtype, shape});
  CHECK_EQ(static_cast<int64_t>(values.size()), t.numel());
  NarrowFromFloat(dtype, values.data(), t.numel(), t.raw_data());
  return t;
}

Tensor MakeTensor(const Shape& shape, const std::vector<int64_t>& values) {
  Tensor t(TensorMeta{proto::INT64, shape});
  CHECK_EQ(static_cast<int64_t>(values.size()), t.numel());
  std::memcpy(t.raw_data(), values.data(), t.bytes());
  return t;
}

}  // namespace loom
