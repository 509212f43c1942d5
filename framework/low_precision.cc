#include "framework/low_precision.h"

#include <glog/logging.h>

namespace loom {

void WidenToFloat(DataType dtype, const void* src, int64_t n, float* dst) {
  switch (dtype) {
    case proto::FP32:
      std::memcpy(dst, src, sizeof(float) * n);
      return;
    case proto::BF16: {
      const bfloat16* s = static_cast<const bfloat16*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = ToFloat(s[i]);
      return;
    }
    case proto::FP16: {
      const float16* s = static_cast<const float16*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = ToFloat(s[i]);
      return;
    }
    default:
      LOG(FATAL) << "WidenToFloat of " << DataTypeName(dtype);
  }
}

void NarrowFromFloat(DataType dtype, const float* src, int64_t n, void* dst) {
  switch (dtype) {
    case proto::FP32:
      std::memcpy(dst, src, sizeof(float) * n);
      return;
    case proto::BF16: {
      bfloat16* d = static_cast<bfloat16*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = ToBfloat16(src[i]);
      return;
    }
    case proto::FP16: {
      float16* d = static_cast<float16*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = ToFloat16(src[i]);
      return;
    }
    default:
      LOG(FATAL) << "NarrowFromFloat to " << DataTypeName(dtype);
  }
}

}  // namespace loom
