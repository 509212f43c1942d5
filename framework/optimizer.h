// Appends parameter updates (role optimize) for the gradients autodiff made.
#ifndef LOOM_FRAMEWORK_OPTIMIZER_H_
#define LOOM_FRAMEWORK_OPTIMIZER_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "framework/autodiff.h"
#include "framework/program.h"

namespace loom {

struct OptimizerConfig {
  std::string type = "adamw";  // "adamw" or "sgd"
  float learning_rate = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  // Decoupled weight decay, applied to matrices only: decaying biases and
  // layer-norm gains is the usual mistake this avoids.
  float weight_decay = 0.01f;
  // The learning-rate schedule (framework/lr_schedule.h): learning_rate is
  // its peak. With warm-up or a decay, an lr_schedule op computes each
  // step's rate from a step counter (kLrStepVar) in the program.
  int64_t warmup_steps = 0;
  std::string lr_decay = "constant";  // "constant", "linear" or "cosine"
  int64_t decay_steps = 0;            // warm-up included
  float min_learning_rate = 0.0f;
  bool has_schedule() const { return warmup_steps > 0 || lr_decay != "constant"; }
  // > 0: the global gradient norm is clipped to it before the updates
  // (framework/grad_clip.h), as Megatron's --clip-grad.
  float clip_grad_norm = 0.0f;
};

// The persistable var holding the learning rate, shape [1].
inline constexpr const char* kLearningRateVar = "learning_rate";
// The persistable int64 step counter a scheduled learning rate is computed
// from; optimizer state, so checkpoints carry it.
inline constexpr const char* kLrStepVar = "learning_rate.step";

// Declares the persistable `name` in both programs and a fill_constant in
// `startup` that gives it `value`: how optimizer state (moments, the
// learning rate, a loss scale) comes to be.
Status AddOptimizerState(Program& main, Program& startup, const std::string& name,
                         const Shape& shape, float value, DataType dtype = proto::FP32);

// Adds one update op per (param, grad) pair to `main`, in the order given
// (the order gradients complete), and the ops that initialize the optimizer
// state (learning rate, moments, beta powers) to `startup`. The error names
// the pair at fault.
Status AppendOptimizer(Program& main, Program& startup,
                       const std::vector<ParamGradPair>& pairs,
                       const OptimizerConfig& config);

// The vars of `block` that tensor parallelism splits, with the dim each
// splits along: parameters with an mp_axis, and the optimizer state of
// their shape (the Moment1 and Moment2 of the op updating them) along the
// same dim. The tensor-parallel pass shards these; checkpoints gather and
// re-slice them.
std::map<std::string, int> MpShardedVars(const Block& block);

// The optimizer state of `block`: the vars an optimize-role op reads in a
// slot and writes back in that slot's "Out" (Moment1 and Moment1Out, ...),
// parameters aside. What a checkpoint carries beside the parameters; not
// the learning rate (config) or gradient buffers (rebuilt each step).
std::set<std::string> OptimizerStateVars(const Block& block);

}  // namespace loom

#endif  // LOOM_FRAMEWORK_OPTIMIZER_H_
