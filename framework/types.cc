#include "framework/types.h"

#include <sstream>

namespace loom {

int64_t SizeOf(DataType dtype) {
  switch (dtype) {
    case proto::FP32: return 4;
    case proto::FP16: return 2;
    case proto::BF16: return 2;
    case proto::FP64: return 8;
    case proto::INT32: return 4;
    case proto::INT64: return 8;
    case proto::BOOL: return 1;
  }
  return 0;
}

const char* DataTypeName(DataType dtype) {
  switch (dtype) {
    case proto::FP32: return "fp32";
    case proto::FP16: return "fp16";
    case proto::BF16: return "bf16";
    case proto::FP64: return "fp64";
    case proto::INT32: return "int32";
    case proto::INT64: return "int64";
    case proto::BOOL: return "bool";
  }
  return "?";
}

bool IsFloating(DataType dtype) {
  return dtype == proto::FP32 || dtype == proto::FP16 ||
         dtype == proto::BF16 || dtype == proto::FP64;
}

bool IsComputeFloat(DataType dtype) {
  return dtype == proto::FP32 || dtype == proto::BF16 || dtype == proto::FP16;
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) os << ", ";
    os << shape[i];
  }
  os << "]";
  return os.str();
}

std::string MetaToString(const TensorMeta& meta) {
  return std::string(DataTypeName(meta.dtype)) + ShapeToString(meta.shape);
}

namespace role {
std::string ToString(uint32_t r) {
  static const std::pair<uint32_t, const char*> kNames[] = {
      {kForward, "forward"},         {kBackward, "backward"},
      {kOptimize, "optimize"},       {kLRSchedule, "lr_schedule"},
      {kLoss, "loss"},               {kComm, "comm"},
      {kInputGrad, "input_grad"},    {kWeightGrad, "weight_grad"},
  };
  std::string out;
  for (const auto& [bit, name] : kNames) {
    if (r & bit) {
      if (!out.empty()) out += "|";
      out += name;
    }
  }
  return out.empty() ? "none" : out;
}
}  // namespace role

bool IsGradVarName(const std::string& name) {
  return name.find(kGradSuffix) != std::string::npos;
}

std::string StripGradSuffix(const std::string& name) {
  size_t pos = name.find(kGradSuffix);
  return pos == std::string::npos ? name : name.substr(0, pos);
}

}  // namespace loom
