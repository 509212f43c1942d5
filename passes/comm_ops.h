// The communication ops passes insert, built one way everywhere: ring,
// stream and the communication role bit set together.
#ifndef LOOM_PASSES_COMM_OPS_H_
#define LOOM_PASSES_COMM_OPS_H_

#include <string>
#include <vector>

#include "framework/op_builder.h"
#include "scheduler/layout.h"

namespace loom {

// `type` (allreduce, identity, ...) from X to Out on `ring`, run on
// `stream`, with role `phase | comm`.
inline proto::OpDesc CollectiveOp(const std::string& type,
                                  const std::vector<std::string>& x,
                                  const std::vector<std::string>& out,
                                  RingId ring, const char* stream,
                                  uint32_t phase) {
  proto::OpDesc d = OpDescBuilder(type)
                        .Input("X", x)
                        .Output("Out", out)
                        .Attr("ring_id", static_cast<int32_t>(ring))
                        .Role(phase | role::kComm);
  d.set_stream(stream);
  return d;
}

}  // namespace loom

#endif  // LOOM_PASSES_COMM_OPS_H_
