// The communication ops passes insert, built one way everywhere: ring,
// stream and the communication role bit set together.
#ifndef LOOM_PASSES_COMM_OPS_H_
#define LOOM_PASSES_COMM_OPS_H_

#include <string>
#include <vector>

#include "framework/op_builder.h"
#include "framework/program.h"
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

// A collective over the mp ring, on the mp stream, placed beside `anchor`:
// it runs in the same pipeline stage, chunk and layer, so that the passes
// that insert them may run before or after pipeline-split.
inline proto::OpDesc MpCollectiveBeside(const std::string& type, const std::string& in,
                                        const std::string& out, uint32_t phase,
                                        const Op& anchor) {
  proto::OpDesc d = CollectiveOp(type, {in}, {out}, kMpRing, stream::kMp, phase);
  d.set_pipeline_stage(anchor.desc().pipeline_stage());
  d.set_chunk(anchor.desc().chunk());
  d.set_layer(anchor.desc().layer());
  return d;
}

}  // namespace loom

#endif  // LOOM_PASSES_COMM_OPS_H_
