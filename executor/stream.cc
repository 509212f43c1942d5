#include "executor/stream.h"

namespace loom {

const char* DeviceTypeName(DeviceType type) {
  switch (type) {
    case DeviceType::kCpu: return "cpu";
    case DeviceType::kCuda: return "cuda";
  }
  return "?";
}

StatusOr<DeviceType> ParseDeviceType(const std::string& name) {
  if (name == "cpu") return DeviceType::kCpu;
  if (name == "cuda") return DeviceType::kCuda;
  return InvalidArgument("unknown device '", name, "' (cpu or cuda)");
}

}  // namespace loom
