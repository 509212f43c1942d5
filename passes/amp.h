// Automatic mixed precision over a training program, in Paddle's levels:
//
//   O1: ops on the white list (matmul) compute in the low dtype, ops on the
//       black list (the loss: cross entropy and the reductions after it) in
//       fp32, and every other op in whichever its float inputs already are:
//       low once any of them is. Casts go in where precisions meet.
//   O2: every op computes in the low dtype but the black list's, from the
//       first: parameters are cast where they are read.
//
// Both levels keep the parameters themselves in fp32: they are the master
// weights the optimizer updates, in fp32 with fp32 moments, and each
// forward reads a low-precision cast of them (made right before the op that
// reads it, so that it lands in that op's pipeline stage). Gradients reach
// the parameters through the casts' gradients, so they are accumulated and
// reduced in fp32. Layer norm's scale, bias and statistics stay fp32.
//
// The backward is made again for the rewritten forward (AppendBackward),
// and the optimizer ops, unchanged, follow it in the order the new
// gradients complete; a clip section (framework/grad_clip.h) is made again
// over the new gradients.
#ifndef LOOM_PASSES_AMP_H_
#define LOOM_PASSES_AMP_H_

#include <string>

#include "framework/program.h"
#include "framework/status.h"
#include "passes/strategy.pb.h"

namespace loom {

struct AmpConfig {
  int level = 0;                   // 0 (off), 1 or 2
  DataType dtype = proto::BF16;    // BF16 or FP16
  // fp16 only: dynamic loss scaling's first scale, and the good steps
  // after which it doubles (framework/grad_scale.h).
  float init_loss_scale = 65536.0f;
  int64_t growth_interval = 2000;
  // What data-parallel reductions move fp32 gradients in: FP32, or `dtype`.
  DataType grad_reduce_dtype = proto::FP32;
};

// "O0", "O1", "O2" -> 0, 1, 2; "bf16", "fp16" -> BF16, FP16. Errors name
// the value and what is allowed.
StatusOr<int> ParseAmpLevel(const std::string& text);
StatusOr<DataType> ParseAmpDtype(const std::string& text);
// The strategy's amp section; errors name the field ("amp.level").
StatusOr<AmpConfig> AmpConfigOf(const proto::Strategy& strategy);

// Rewrites `program` (forward, and the backward and optimizer after it, if
// it has them) for `config`; nothing at level 0. The forward must end in a
// loss op (role loss) where there is a backward.
//
// fp16 training also gets dynamic loss scaling: the loss gradient is seeded
// with kLossScaleVar (framework/grad_clip.h), the updates take the
// gradients unscaled and skip a step whose gradients overflowed, and
// update_loss_scale adapts the scale. Its state is persistable optimizer
// state, initialized by `startup`, which fp16 with a backward needs.
Status ApplyAmp(Program& program, const AmpConfig& config, Program* startup = nullptr);

// A cast op from `from` (of `from_dtype`) to `to` (of `to_dtype`), with no
// role or place yet: AMP's casts at each use and the low-precision-weights
// pass's once-a-step copies are both made by it.
proto::OpDesc CastOp(const std::string& from, const std::string& to, DataType from_dtype,
                     DataType to_dtype);

}  // namespace loom

#endif  // LOOM_PASSES_AMP_H_
