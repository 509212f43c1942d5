// Global-norm gradient clipping in a program.
//
// A program that clips holds a clip section between its backward and its
// parameter updates:
//
//   grad_norm.squared = squared_l2_norm(the gradients this rank counts)
//   [all-reduces of grad_norm.squared over the rings that split them]
//   grad_norm.scale, grad_norm = grad_scale(grad_norm.squared){max_norm}
//   every update: GradScale = grad_norm.scale
//
// The serial program counts every gradient whole and has no all-reduces
// (AppendOptimizer). A parallel program's section is derived again from its
// updates by the grad-clip pass (passes/grad_clip_pass.cc), which knows the
// layout: which gradients are shards, replicas or ZeRO parts. The planner
// takes the serial section off before the parallel passes run
// (TakeGradClip) and hands its max_norm to that pass.
#ifndef LOOM_FRAMEWORK_GRAD_CLIP_H_
#define LOOM_FRAMEWORK_GRAD_CLIP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "framework/program.h"

namespace loom {

inline constexpr const char* kGradSquaredNormVar = "grad_norm.squared";
inline constexpr const char* kGradScaleVar = "grad_norm.scale";
// The global gradient norm of the step, before clipping: what step lines print.
inline constexpr const char* kGradNormVar = "grad_norm";
// fp16 dynamic loss scaling's state (passes/amp.h): the scale the loss
// gradient is seeded with, and the good steps since it last changed.
inline constexpr const char* kLossScaleVar = "loss_scale";
inline constexpr const char* kLossScaleGoodStepsVar = "loss_scale.good_steps";

// What a clip section does: clip to max_norm (0: no clipping), and with
// loss scaling undo the scale, skip steps that overflowed and adapt it
// (update_loss_scale, growing after growth_interval good steps).
struct GradScaling {
  float max_norm = 0;
  bool loss_scaling = false;
  int64_t growth_interval = 2000;
  float init_loss_scale = 65536;
  bool any() const { return max_norm > 0 || loss_scaling; }
};

// One gradient's share of the norm: the whole tensor, or element ranges of
// it. With part_ring >= 0 the gradient is this rank's part of a buffer
// split evenly over that ring, and the ranges are in the buffer's
// coordinates.
struct GradNormTerm {
  std::string grad;
  std::vector<std::pair<int64_t, int64_t>> ranges;  // [begin, end); empty: whole
  int part_ring = -1;
};

// squared_l2_norm over `terms` into `out`, role optimize.
proto::OpDesc SquaredNormOp(const std::vector<GradNormTerm>& terms, const std::string& out);

// What follows the all-reduced sum of squares: grad_scale into
// kGradScaleVar and kGradNormVar, and with loss scaling update_loss_scale
// of the loss-scale state; role optimize.
std::vector<proto::OpDesc> GradScaleOps(const GradScaling& scaling);

// Parameter updates: optimize-role ops with Param, Grad and ParamOut.
bool IsParameterUpdate(const Op& op);

// Adds the serial clip section to `block`, before the first update: every
// update's gradient counted whole, each update reading the scale.
Status AddSerialGradClip(Block& block, const GradScaling& scaling);

// Declares the loss-scale state (kLossScaleVar, a scalar, and
// kLossScaleGoodStepsVar) in `main` and `startup`, which initializes it:
// each var `startup` does not hold yet.
Status DeclareLossScaleState(Program& main, Program& startup, float init_loss_scale);

// The loss scale `startup` initializes kLossScaleVar to, if it does.
std::optional<float> InitialLossScale(const Program& startup);

// Whether `program` holds a clip section.
bool HasGradClip(const Program& program);

// Removes the clip section from `program` (a serial one, or one the
// grad-clip pass wrote) and the updates' GradScale; returns what it did
// (nothing: the program has none).
StatusOr<GradScaling> TakeGradClip(Program& program);

// squared_l2_norm's element ranges in each input's own coordinates, given
// the inputs' sizes and this rank's place in each ring, by ring id
// (RunInfo::ring_index; null outside a rank executor): what both
// backends' kernels sum, in this order.
struct NormRange {
  int input = 0;
  int64_t begin = 0, end = 0;
};
StatusOr<std::vector<NormRange>> LocalNormRanges(const proto::OpDesc& op,
                                                 const std::vector<int64_t>& input_sizes,
                                                 const std::vector<int>* ring_places);

}  // namespace loom

#endif  // LOOM_FRAMEWORK_GRAD_CLIP_H_
