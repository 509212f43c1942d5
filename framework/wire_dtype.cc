#include "framework/wire_dtype.h"

namespace loom {

StatusOr<DataType> ParseWireDtype(const std::string& text, DataType held) {
  if (text.empty()) return held;
  DataType wire;
  if (text == "fp32") {
    wire = proto::FP32;
  } else if (text == "bf16") {
    wire = proto::BF16;
  } else if (text == "fp16") {
    wire = proto::FP16;
  } else {
    return InvalidArgument("wire dtype '", text, "' is not one of fp32, bf16, fp16");
  }
  if (wire != held && held != proto::FP32) {
    return InvalidArgument("wire dtype ", text, " for ", DataTypeName(held),
                           " data: only fp32 data is reduced in a narrower dtype");
  }
  return wire;
}

DataType WireDtypeOf(const Op& op, const proto::VarDesc& var) {
  if (!op.HasAttr(kWireDtypeAttr)) return var.dtype();
  StatusOr<DataType> wire =
      ParseWireDtype(op.GetAttr<std::string>(kWireDtypeAttr), var.dtype());
  return wire.ok() ? *wire : var.dtype();
}

}  // namespace loom
