// gradient-accumulation: one step is now `steps` micro-batches.
//
// Data vars shrink to a micro-batch; the loss gradient is seeded with
// 1/steps, so that gradients summed over the micro-batches are the
// gradient of the mean loss over the whole batch; each parameter's final
// gradient is added into a persistable accumulator that the optimizer reads
// and then zeroes.
#include "framework/op_builder.h"
#include "framework/shape_inference.h"
#include "passes/parallel_passes.h"

namespace loom {
namespace {

constexpr const char* kPassName = "gradient-accumulation";

struct GradientAccumulationOptions {
  int64_t steps = 1;
};

class GradientAccumulationPass : public Pass {
 public:
  explicit GradientAccumulationPass(const GradientAccumulationOptions& options)
      : steps_(options.steps) {}
  StatusOr<bool> Run(PassContext& ctx) override;

 private:
  int64_t steps_;
};

StatusOr<bool> GradientAccumulationPass::Run(PassContext& ctx) {
  ctx.resolved().set_micro_batches(static_cast<int32_t>(steps_));
  if (steps_ == 1) return false;
  Block& block = ctx.program().global_block();
  LOOM_RETURN_IF_ERROR(
      ShardBatchDim(block, steps_, "pipeline.micro_batches"));

  // Seed d(loss) with 1/steps.
  for (Op* op : block.ops()) {
    if (op->type() == "fill_constant" && op->HasRole(role::kBackward) &&
        op->HasRole(role::kLoss)) {
      op->SetAttr("value", 1.0f / static_cast<float>(steps_));
    }
  }
  // Accumulate each final gradient; the optimizer reads the accumulator.
  std::unordered_map<std::string, std::string> acc_of;  // grad -> accumulator
  Block& startup = ctx.startup().global_block();
  for (Op* op : block.OpVector()) {
    if (op->desc().param_grads_size() == 0) continue;
    proto::OpDesc::Slot kept;
    std::vector<proto::ParamGrad> pairs(op->desc().param_grads().begin(),
                                        op->desc().param_grads().end());
    op->annotations().clear_param_grads();
    Op* last = op;
    for (const proto::ParamGrad& pg : pairs) {
      const std::string acc = pg.grad() + "@ACCUM";
      for (Block* b : {&block, &startup}) {
        proto::VarDesc* v = b->AddVar(acc);
        *v = *block.FindVar(pg.grad());
        v->set_name(acc);
        v->set_persistable(true);
      }
      LOOM_RETURN_IF_ERROR(AppendOpInferShapes(startup, OpDescBuilder("fill_constant")
                                                            .Output("Out", acc)
                                                            .Attr("shape", MetaOf(*block.FindVar(acc)).shape)
                                                            .Attr("value", 0.0f))
                               .status());
      proto::OpDesc add = OpDescBuilder("elementwise_add")
                              .Input("X", acc)
                              .Input("Y", pg.grad())
                              .Output("Out", acc)
                              .Role(role::kBackward);
      add.set_forward_id(op->desc().forward_id());
      add.set_pipeline_stage(op->desc().pipeline_stage());
      add.set_chunk(op->desc().chunk());
      proto::ParamGrad* moved = add.add_param_grads();
      moved->set_param(pg.param());
      moved->set_grad(acc);
      LOOM_ASSIGN_OR_RETURN(last, InsertOpAfterInferShapes(block, last, add));
      acc_of[pg.grad()] = acc;
    }
  }
  // The optimizer reads the accumulators: the update's Grad, and any
  // all-reduce of it that runs in the optimizer job.
  for (Op* op : block.OpVector()) {
    if (!op->HasRole(role::kOptimize)) continue;
    for (const std::string& in : op->InputVars()) {
      auto it = acc_of.find(in);
      if (it == acc_of.end()) continue;
      block.RenameInput(op, it->first, it->second);
      block.RenameOutput(op, it->first, it->second);
    }
    if (!op->HasInput("Grad") || !op->HasInput("Param")) continue;
    const std::string acc = op->Input("Grad");
    if (acc.size() < 6 || acc.compare(acc.size() - 6, 6, "@ACCUM") != 0) continue;
    // Zero the accumulator for the next step once the update has read it.
    proto::OpDesc zero = OpDescBuilder("fill_constant")
                             .Output("Out", acc)
                             .Attr("shape", MetaOf(*block.FindVar(acc)).shape)
                             .Attr("value", 0.0f)
                             .Role(role::kOptimize);
    zero.set_pipeline_stage(op->desc().pipeline_stage());
    zero.set_chunk(op->desc().chunk());
    LOOM_RETURN_IF_ERROR(InsertOpAfterInferShapes(block, op, zero).status());
  }
  ctx.Explain(kPassName, StrCat(acc_of.size(), " gradients accumulate over ",
                                steps_, " micro-batches"));
  return true;
}

}  // namespace

PassInfo GradientAccumulationPassInfo() {
  using O = GradientAccumulationOptions;
  PassInfo info = PassInfoOf<GradientAccumulationPass, O>(
      kPassName,
      "splits the batch into micro-batches and accumulates gradients into persistable buffers "
      "the optimizer reads");
  info.options = {IntOption(&O::steps, "steps", "micro-batches a step", 1, kMaxWorldSize)};
  return info;
}

}  // namespace loom
