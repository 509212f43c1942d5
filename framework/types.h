// Small value types shared by the IR, the op registry and the executor.
#ifndef LOOM_FRAMEWORK_TYPES_H_
#define LOOM_FRAMEWORK_TYPES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "framework/framework.pb.h"

namespace loom {

using DataType = proto::DataType;
using Shape = std::vector<int64_t>;

// Bytes per element; 1 for BOOL.
int64_t SizeOf(DataType dtype);
const char* DataTypeName(DataType dtype);
bool IsFloating(DataType dtype);
// The dtypes kernels compute on: fp32, and bf16 and fp16, which they load
// into fp32 and round on the store (framework/low_precision.h).
bool IsComputeFloat(DataType dtype);

int64_t NumElements(const Shape& shape);
// "[2, 3, 4]"; "[]" for a scalar.
std::string ShapeToString(const Shape& shape);

// Shape and dtype of a value, without its data.
struct TensorMeta {
  DataType dtype = proto::FP32;
  Shape shape;
  bool operator==(const TensorMeta& o) const {
    return dtype == o.dtype && shape == o.shape;
  }
  bool operator!=(const TensorMeta& o) const { return !(*this == o); }
};
std::string MetaToString(const TensorMeta& meta);

// OpRole helpers over the bit set stored in OpDesc.role.
namespace role {
constexpr uint32_t kForward = proto::ROLE_FORWARD;
constexpr uint32_t kBackward = proto::ROLE_BACKWARD;
constexpr uint32_t kOptimize = proto::ROLE_OPTIMIZE;
constexpr uint32_t kLRSchedule = proto::ROLE_LR_SCHEDULE;
constexpr uint32_t kLoss = proto::ROLE_LOSS;
constexpr uint32_t kComm = proto::ROLE_COMMUNICATION;
constexpr uint32_t kInputGrad = proto::ROLE_INPUT_GRAD;
constexpr uint32_t kWeightGrad = proto::ROLE_WEIGHT_GRAD;
// "forward", "backward|loss", ...
std::string ToString(uint32_t role);
}  // namespace role

// Named stream types. An op with no stream runs on calc; passes put
// communication on the others so that it can run under computation.
namespace stream {
inline constexpr const char* kCalc = "calc";
inline constexpr const char* kMp = "mp";
inline constexpr const char* kDp = "dp";
inline constexpr const char* kSharding = "sharding";
inline constexpr const char* kP2pSend = "p2p_send";
inline constexpr const char* kP2pRecv = "p2p_recv";
// Under a V (ZBV) every kind and direction of transfer has streams of its
// own: activations or gradients ("_grad"), moving to a later stage or up
// toward stage 0 ("_up"). Shared, a FIFO stream would hold a transfer ready
// for one peer behind one that waits for the other.
inline constexpr const char* kP2pSendUp = "p2p_send_up";
inline constexpr const char* kP2pRecvUp = "p2p_recv_up";
inline constexpr const char* kP2pSendGrad = "p2p_send_grad";
inline constexpr const char* kP2pRecvGrad = "p2p_recv_grad";
inline constexpr const char* kP2pSendGradUp = "p2p_send_grad_up";
inline constexpr const char* kP2pRecvGradUp = "p2p_recv_grad_up";

// An op's stream (OpDesc.stream) is calc: named so, or not named.
inline bool IsCalc(const std::string& stream) { return stream.empty() || stream == kCalc; }

// The priority of an op that sets none (OpDesc.stream_priority): every
// stream but calc outranks calc, so that a ready communication gets a core
// before more computation does (its wait is exposed; the compute it
// delays is not, while other communication hides under it).
inline int DefaultPriority(const std::string& stream) {
  return IsCalc(stream) ? 0 : 1;
}
}  // namespace stream

// Paddle-style gradient naming: the gradient of "x" is "x@GRAD".
inline constexpr const char* kGradSuffix = "@GRAD";
inline std::string GradVarName(const std::string& var) {
  return var + kGradSuffix;
}
bool IsGradVarName(const std::string& name);
std::string StripGradSuffix(const std::string& name);

}  // namespace loom

#endif  // LOOM_FRAMEWORK_TYPES_H_
