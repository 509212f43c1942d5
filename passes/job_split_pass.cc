// job-split: one program per kind of job. Forward ops of chunk c go to
// forward.c, backward ops to backward.c (or backward_b.c / backward_w.c
// once split-backward has tagged them), optimizer ops to optimizer. Each
// program declares the vars it touches; vars made by one job and read by a
// later one (activations kept for the backward) cross jobs through the
// micro-batch's scope.
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "passes/parallel_passes.h"

namespace loom {
namespace {

constexpr const char* kPassName = "job-split";

class JobSplitPass : public Pass {
 public:
  StatusOr<bool> Run(PassContext& ctx) override;
};

StatusOr<bool> JobSplitPass::Run(PassContext& ctx) {
  const Block& block = ctx.program().global_block();
  bool split_backward = false;
  int chunks = std::max(1, ctx.vpp_degree());
  for (Op* op : block.ops()) {
    split_backward |= op->HasRole(role::kInputGrad) || op->HasRole(role::kWeightGrad);
    chunks = std::max(chunks, op->desc().chunk() + 1);
  }
  WorkingPlan& plan = ctx.plan();
  plan.programs.clear();
  plan.num_chunks = chunks;
  // Every program a schedule may ask for exists, even if empty.
  for (int c = 0; c < chunks; ++c) {
    plan.programs[{JobType::kForward, c}];
    if (split_backward) {
      plan.programs[{JobType::kBackwardB, c}];
      plan.programs[{JobType::kBackwardW, c}];
    } else {
      plan.programs[{JobType::kBackward, c}];
    }
  }
  plan.programs[{JobType::kOptimizer, 0}];
  // A program that reads a ZeRO-3 shard also declares the parameters laid
  // out in its bucket, though no op of it may read them (gathered in the
  // compute dtype, the bucket's readers read casts): the executor fills the
  // shard from them on first use (executor/flat_buffers.h), and
  // checkpoints map the shard back to them (runtime/sharded_state.h).
  std::unordered_map<std::string, std::vector<std::string>> members_of;  // temporary buffer ->
  for (const auto& [name, var] : block.vars()) {
    if (!var.has_flat() || var.flat().shard_ring() >= 0 || !var.is_parameter()) continue;
    const proto::VarDesc* buffer = block.FindVar(var.flat().buffer());
    if (buffer != nullptr && !buffer->persistable()) members_of[buffer->name()].push_back(name);
  }
  auto declare = [&](Block& dst, const std::string& v) {
    proto::VarDesc* var = dst.CopyVarFrom(block, v);
    if (var->has_flat() && var->flat().shard_ring() >= 0) {
      auto members = members_of.find(var->flat().buffer());
      if (members != members_of.end()) {
        for (const std::string& m : members->second) {
          if (!dst.HasVar(m)) dst.CopyVarFrom(block, m);
        }
      }
    }
    return var;
  };
  for (Op* op : block.ops()) {
    JobProgramKey key;
    key.chunk = std::max(0, op->desc().chunk());
    if (op->HasRole(role::kForward)) {
      key.type = JobType::kForward;
    } else if (op->HasRole(role::kBackward)) {
      key.type = !split_backward ? JobType::kBackward
                 : op->HasRole(role::kWeightGrad) ? JobType::kBackwardW
                                                  : JobType::kBackwardB;
    } else {
      key.type = JobType::kOptimizer;
      key.chunk = 0;
    }
    Block& dst = plan.programs[key].global_block();
    for (const std::string& v : op->InputVars()) {
      if (dst.HasVar(v)) continue;
      proto::VarDesc* var = declare(dst, v);
      // Read before this program writes it: an earlier job made it.
      var->set_job_input(!var->persistable() && !var->is_data());
    }
    for (const std::string& v : op->OutputVars()) {
      if (!dst.HasVar(v)) declare(dst, v);
    }
    dst.AppendOp(op->desc());
  }
  ctx.Explain(kPassName, StrCat(plan.programs.size(), " job programs, ", chunks,
                                " chunk(s)", split_backward ? ", backward split" : ""));
  return true;
}

}  // namespace

PassInfo JobSplitPassInfo() {
  return PassInfoOf<JobSplitPass>(
      kPassName, "splits the rank's program into one program per job type and chunk");
}

}  // namespace loom
