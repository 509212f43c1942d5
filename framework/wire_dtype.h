// The dtype a gradient reduction moves its data in: attribute "wire_dtype"
// of allreduce and reduce_scatter. Gradients held in fp32 (the master
// gradients of AMP) can be reduced in the compute dtype, as Megatron
// reduces bf16 gradients, for half the bytes on the wire. Each member's
// values are rounded to the wire dtype once, the communicator sums them in
// float in group-rank order and rounds the sum once
// (executor/comm/reduce_fold.h), and the result is widened back.
#ifndef LOOM_FRAMEWORK_WIRE_DTYPE_H_
#define LOOM_FRAMEWORK_WIRE_DTYPE_H_

#include <string>

#include "framework/program.h"
#include "framework/status.h"

namespace loom {

inline constexpr const char* kWireDtypeAttr = "wire_dtype";

// The wire dtype `text` names for data held in `held`: "" is `held`
// itself; "fp32", "bf16" and "fp16" name theirs, and anything but `held`
// narrows fp32 data only. Errors name the value and what is allowed.
StatusOr<DataType> ParseWireDtype(const std::string& text, DataType held);

// What `op` moves `var`'s data in: its wire dtype where it has a valid
// one, else the var's own.
DataType WireDtypeOf(const Op& op, const proto::VarDesc& var);

}  // namespace loom

#endif  // LOOM_FRAMEWORK_WIRE_DTYPE_H_
