// pipeline-split: cuts the program into pipeline stages and keeps the
// rank's own stage, with send/recv where values cross stages.
//
// Forward ops carry the layer they belong to (OpDesc.layer). Layers are
// grouped into stages x chunks contiguous "virtual stages": by balanced
// analytic cost without VPP (the embedding goes with the first group and
// the head with the last, so the end stages may take fewer layers), evenly
// with VPP, as Megatron's interleaved schedule requires, and under a V by
// VShapedPartition (stage 0, which holds both ends, takes fewer layers). Virtual stage v
// runs on pipeline stage v % stages as chunk v / stages, or with v-shape
// (ZBV) down the stages as chunk 0 and back up as chunk 1
// (PlaceVirtualStage); a value that crosses between virtual stages on one
// stage stays in the micro-batch's scope, with no send/recv.
//
// Every other op follows: an unannotated forward op the ops it reads from,
// a backward op the forward op it differentiates (OpDesc.forward_id), an
// optimizer op its parameter. A parameter read on several stages (the tied
// embedding and LM head) is kept on each of them; each sums its local
// gradient contributions, and before the update the stages all-reduce their
// sums over kSharedParamRing, so every copy takes the same step.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "framework/op_builder.h"
#include "framework/op_work.h"
#include "framework/shape_inference.h"
#include "passes/comm_ops.h"
#include "passes/parallel_passes.h"
#include "passes/pipeline_partition.h"
#include "scheduler/schedule.h"

namespace loom {
namespace {

constexpr const char* kPassName = "pipeline-split";

struct PipelineSplitOptions {
  int64_t stages = 1;
  int64_t chunks = 1;  // model chunks per stage (VPP, ZBV)
  bool v_shape = false;  // chunks placed in a V (ZBV), not interleaved
};

class PipelineSplitPass : public Pass {
 public:
  explicit PipelineSplitPass(const PipelineSplitOptions& options)
      : stages_(static_cast<int>(options.stages)),
        chunks_(static_cast<int>(options.chunks)),
        v_shape_(options.v_shape) {}
  StatusOr<bool> Run(PassContext& ctx) override;

 private:
  // Virtual stage of every op, by position: the layers cut into virtual
  // stages, then the forward ops, the backward ops and the optimizer's
  // placed in that order (each reads where the ones before went).
  Status AssignVirtualStages(PassContext& ctx, const std::vector<Op*>& ops);
  // The virtual stage of each layer, its cut balanced by the layers' costs.
  StatusOr<std::vector<int>> PartitionLayers(PassContext& ctx, const std::vector<Op*>& ops) const;
  void PlaceForward(const std::vector<Op*>& ops, const std::vector<int>& vs_of_layer);
  Status PlaceBackward(const std::vector<Op*>& ops);
  // Each optimizer op on the stage that reads its parameter; records the
  // stages every parameter is read on (param_stages_, shared_).
  void PlaceOptimizer(const std::vector<Op*>& ops);
  // The virtual stage of the placed op that makes `op`'s inputs last: the
  // highest in forward order, the lowest in backward order (a backward
  // runs the virtual stages down). -1 when no placed op makes them.
  int LastProducerStage(const Op* op, bool backward = false) const;
  StageAndChunk Place(int vs) const { return PlaceVirtualStage(vs, stages_, v_shape_); }
  int StageOf(const Op* op) const { return Place(vstage_.at(op)).stage; }
  StatusOr<Program> BuildRankProgram(const Block& block,
                                     const std::vector<Op*>& ops);
  Status PruneStartup(PassContext& ctx);

  int stages_, chunks_;
  bool v_shape_;
  int stage_ = 0;
  std::unordered_map<const Op*, int> vstage_;
  // Physical stages on which each parameter is read in the forward pass.
  std::unordered_map<std::string, std::set<int>> param_stages_;
  std::set<std::string> shared_;
};

// What AssignVirtualStages finds, the same for every stage of a program:
// kept in SharedAnalyses for the other stages' contexts.
struct PipelinePlacement {
  std::unordered_map<const Op*, int> vstage;
  std::unordered_map<std::string, std::set<int>> param_stages;
  std::set<std::string> shared;
  std::vector<std::string> remarks;  // the cut, for --explain
};

Status PipelineSplitPass::AssignVirtualStages(PassContext& ctx,
                                              const std::vector<Op*>& ops) {
  // Another stage of the same program may have placed its ops already.
  SharedAnalyses* shared = ctx.shared_program() != nullptr ? ctx.shared_analyses() : nullptr;
  const std::string key =
      StrCat(kPassName, " stages=", stages_, " chunks=", chunks_, " v-shape=", v_shape_);
  if (shared != nullptr) {
    if (const auto* placed = shared->Find<PipelinePlacement>(key)) {
      vstage_ = placed->vstage;
      param_stages_ = placed->param_stages;
      shared_ = placed->shared;
      for (const std::string& remark : placed->remarks) ctx.Explain(kPassName, remark);
      return Status::OK();
    }
  }
  const size_t remarks_before = ctx.remarks().size();
  LOOM_ASSIGN_OR_RETURN(const std::vector<int> vs_of_layer, PartitionLayers(ctx, ops));
  PlaceForward(ops, vs_of_layer);
  LOOM_RETURN_IF_ERROR(PlaceBackward(ops));
  PlaceOptimizer(ops);
  if (shared != nullptr) {
    PipelinePlacement placed{vstage_, param_stages_, shared_, {}};
    const std::string prefix = StrCat(kPassName, ": ");
    for (size_t i = remarks_before; i < ctx.remarks().size(); ++i) {
      placed.remarks.push_back(ctx.remarks()[i].substr(prefix.size()));
    }
    shared->Store(key, std::move(placed));
  }
  return Status::OK();
}

StatusOr<std::vector<int>> PipelineSplitPass::PartitionLayers(
    PassContext& ctx, const std::vector<Op*>& ops) const {
  // An op's cost is its time on the cluster planned for when the context
  // has its costs, else its FLOPs.
  const OpCostEstimator* costs =
      ctx.costs() != nullptr && !ctx.cut_by_flops() ? &ctx.costs()->ops() : nullptr;
  auto cost_of = [&](const Op& op) -> StatusOr<double> {
    if (costs == nullptr) return WorkOf(op).flops;
    LOOM_ASSIGN_OR_RETURN(OpCost c, costs->EstimateOp(op));
    return c.seconds;
  };
  LOOM_ASSIGN_OR_RETURN(const ForwardCosts forward, ForwardCostsByLayer(ops, cost_of));
  const int v = stages_ * chunks_;
  const int num_layers = static_cast<int>(forward.layers.size());
  if (num_layers < v) {
    return InvalidArgument("pipeline.degree (", stages_, ") x pipeline.vpp_degree (",
                           chunks_, ") = ", v,
                           " virtual stages exceed the ", num_layers, " layers");
  }
  if (chunks_ > 1 && !v_shape_ && num_layers % v != 0) {
    return InvalidArgument("pipeline.vpp_degree (", chunks_, ") x pipeline.degree (",
                           stages_, ") = ", v, " does not divide the ",
                           num_layers, " layers");
  }
  const std::vector<int> starts = VirtualStageStarts(forward, stages_, chunks_, v_shape_);
  const std::vector<double>& layer_cost = forward.layers;
  const double pre = forward.pre, post = forward.post;
  std::vector<int> vs_of_layer(num_layers);
  for (int g = 0; g < v; ++g) {
    const int end = g + 1 < v ? starts[g + 1] : num_layers;
    double cost = (g == 0 ? pre : 0) + (g == v - 1 ? post : 0);
    for (int l = starts[g]; l < end; ++l) {
      vs_of_layer[l] = g;
      cost += layer_cost[l];
    }
    ctx.Explain(kPassName, StrCat("virtual stage ", g, " (stage ", Place(g).stage,
                                  ", chunk ", Place(g).chunk, "): layers ",
                                  starts[g], "-", end - 1, ", ",
                                  costs != nullptr ? StrCat(cost * 1e3, " ms")
                                                   : StrCat(cost / 1e9, " GFLOP"),
                                  " forward"));
  }
  return vs_of_layer;
}

int PipelineSplitPass::LastProducerStage(const Op* op, bool backward) const {
  const Block& block = *op->block();
  int best = -1;
  for (const std::string& in : op->InputVars()) {
    for (Op* p : block.Producers(in)) {
      auto it = vstage_.find(p);
      if (it == vstage_.end() || p->index() >= op->index()) continue;
      if (best < 0 || (backward ? it->second < best : it->second > best)) best = it->second;
    }
  }
  return best;
}

void PipelineSplitPass::PlaceForward(const std::vector<Op*>& ops,
                                     const std::vector<int>& vs_of_layer) {
  const Block& block = *ops.front()->block();
  // A forward op outside the layers goes where its inputs are made; one
  // that reads only parameters and data (a cast of a weight, under mixed
  // precision) goes to its first reader's stage instead, so that the
  // parameter is read where it lives.
  std::vector<Op*> by_readers;
  for (Op* op : ops) {
    if (!op->HasRole(role::kForward)) continue;
    int vs = op->desc().layer() >= 0 ? vs_of_layer[op->desc().layer()] : LastProducerStage(op);
    if (vs < 0) {
      by_readers.push_back(op);
      vs = 0;
    }
    vstage_[op] = vs;
  }
  for (auto it = by_readers.rbegin(); it != by_readers.rend(); ++it) {
    Op* op = *it;
    int first = -1;
    for (const std::string& out : op->OutputVars()) {
      for (Op* reader : block.Consumers(out)) {
        auto at = vstage_.find(reader);
        if (at == vstage_.end() || !reader->HasRole(role::kForward)) continue;
        if (first < 0 || reader->index() < first) {
          first = reader->index();
          vstage_[op] = at->second;
        }
      }
    }
  }
}

Status PipelineSplitPass::PlaceBackward(const std::vector<Op*>& ops) {
  const Block& block = *ops.front()->block();
  for (Op* op : ops) {
    // Forward ops are placed; optimizer ops go by their parameter, later.
    if (op->HasRole(role::kForward) || !op->HasRole(role::kBackward)) continue;
    const Op* fwd = block.FindOpById(op->desc().forward_id());
    int vs;
    if (op->type() == "sum") {
      // Gradient contributions are added where the last of them is
      // computed, so one sum crosses the cut instead of every part. (Under
      // a V the tied embedding's two contributions are both on stage 0,
      // the head's computed first.)
      vs = LastProducerStage(op, /*backward=*/true);
    } else if (fwd != nullptr && vstage_.count(fwd)) {
      vs = vstage_.at(fwd);
    } else {
      vs = LastProducerStage(op);
      if (vs < 0) {
        return Internal(op->Location(), ": backward op with no forward op and no producer");
      }
    }
    vstage_[op] = vs;
  }
  return Status::OK();
}

void PipelineSplitPass::PlaceOptimizer(const std::vector<Op*>& ops) {
  const Block& block = *ops.front()->block();
  // Where each parameter is read in the forward pass.
  for (Op* op : ops) {
    if (!op->HasRole(role::kForward)) continue;
    for (const std::string& in : op->InputVars()) {
      const proto::VarDesc* var = block.FindVar(in);
      if (var != nullptr && var->is_parameter()) {
        param_stages_[in].insert(StageOf(op));
      }
    }
  }
  for (const auto& [param, stages] : param_stages_) {
    if (stages.size() > 1) shared_.insert(param);
  }
  for (Op* op : ops) {
    if (vstage_.count(op)) continue;
    const std::string param = op->Input("Param");
    auto it = param_stages_.find(param);
    // The optimizer op sits on the (first) stage that reads its parameter;
    // shared parameters are handled when the rank's program is built.
    const int stage = it == param_stages_.end() ? 0 : *it->second.begin();
    vstage_[op] = VirtualStageOf(stage, /*chunk=*/0, stages_, v_shape_);
    if (it != param_stages_.end()) {
      // Chunk: that of the first forward reader on this stage.
      for (Op* reader : block.Consumers(param)) {
        if (reader->HasRole(role::kForward) && StageOf(reader) == stage) {
          vstage_[op] = vstage_[reader];
          break;
        }
      }
    }
  }
}

StatusOr<Program> PipelineSplitPass::BuildRankProgram(
    const Block& block, const std::vector<Op*>& ops) {
  Program out;
  Block& dst = out.global_block();
  auto declare = [&](const std::string& name) {
    if (name.empty() || dst.HasVar(name)) return;
    if (const proto::VarDesc* v = block.FindVar(name)) *dst.AddVar(name) = *v;
  };
  auto annotate = [&](proto::OpDesc* d, int vs) {
    d->set_pipeline_stage(Place(vs).stage);
    d->set_chunk(Place(vs).chunk);
  };
  auto emit = [&](proto::OpDesc d, int vs) {
    for (const auto& slot : d.inputs()) for (const auto& v : slot.vars()) declare(v);
    for (const auto& slot : d.outputs()) for (const auto& v : slot.vars()) declare(v);
    annotate(&d, vs);
    dst.AppendOp(std::move(d));
  };
  auto transferable = [&](const std::string& var) {
    const proto::VarDesc* v = block.FindVar(var);
    return v != nullptr && !v->persistable() && !v->is_data();
  };
  // A shared parameter's gradient sum: each stage holding the parameter
  // sums its own contributions, then the stages all-reduce the sums.
  auto is_shared_sum = [&](const Op* op) {
    return op->type() == "sum" && op->desc().param_grads_size() > 0 &&
           shared_.count(op->desc().param_grads(0).param()) > 0;
  };
  // Ops of no one chunk (a shared sum, the learning rate, a shared update)
  // go with the stage's first.
  const int first_vs = VirtualStageOf(stage_, /*chunk=*/0, stages_, v_shape_);
  std::unordered_set<std::string> here;  // vars this rank's program makes
  std::set<std::pair<std::string, int>> sent;
  for (Op* op : ops) {
    int vs = vstage_.at(op);
    if (is_shared_sum(op)) {
      const std::string param = op->desc().param_grads(0).param();
      if (!param_stages_[param].count(stage_)) continue;
      std::vector<std::string> local;
      vs = first_vs;
      for (const std::string& part : op->Inputs("X")) {
        Op* producer = block.FirstProducer(part);
        if (producer != nullptr && StageOf(producer) == stage_) {
          local.push_back(part);
          vs = std::max(vs, vstage_.at(producer));
        }
      }
      proto::OpDesc sum = op->desc();
      sum.clear_inputs();
      auto* x = sum.add_inputs();
      x->set_name("X");
      for (const auto& part : local) x->add_vars(part);
      emit(std::move(sum), vs);
      here.insert(op->Output("Out"));
      continue;
    }
    const bool shared_update = op->HasRole(role::kOptimize) &&
                               shared_.count(op->Input("Param")) > 0;
    // The learning rate's schedule runs on every stage, each of which
    // updates its own parameters with it.
    const bool every_stage = op->HasRole(role::kLRSchedule);
    const bool keep = shared_update ? param_stages_[op->Input("Param")].count(stage_) > 0
                                    : every_stage || StageOf(op) == stage_;
    if (!keep) continue;
    if (every_stage) vs = first_vs;
    if (shared_update) {
      vs = first_vs;
      // The stages' partial gradients meet once per step, before the
      // update, as Megatron all-reduces its embedding group's gradients:
      // an all-reduce per micro-batch would tie the first and last stages'
      // backward passes together and stall the pipeline.
      const std::string grad = op->Input("Grad");
      emit(CollectiveOp("allreduce", {grad}, {grad}, kSharedParamRing,
                        stream::kDp, role::kOptimize),
           vs);
    }
    const uint32_t phase = op->role() & (role::kForward | role::kBackward);
    // Under a V the gradients cross on a ring of their own, and each kind
    // and direction of transfer on streams of its own (ParallelLayout::v_shape
    // and stream::kP2pSendUp say why).
    const bool apart = v_shape_ && (phase & role::kBackward) != 0;
    const int32_t transfer_ring = apart ? kPpGradRing : kPpRing;
    auto transfer_stream = [&](bool send, int peer) -> const char* {
      if (!v_shape_) return send ? stream::kP2pSend : stream::kP2pRecv;
      // Which way the data moves: up when it goes from a later stage to an
      // earlier one.
      const bool up = send ? peer < stage_ : peer > stage_;
      if (send) {
        return apart ? (up ? stream::kP2pSendGradUp : stream::kP2pSendGrad)
                     : (up ? stream::kP2pSendUp : stream::kP2pSend);
      }
      return apart ? (up ? stream::kP2pRecvGradUp : stream::kP2pRecvGrad)
                   : (up ? stream::kP2pRecvUp : stream::kP2pRecv);
    };
    for (const std::string& in : op->InputVars()) {
      if (!transferable(in) || here.count(in)) continue;
      Op* producer = block.FirstProducer(in);
      if (producer == nullptr || StageOf(producer) == stage_) continue;
      const proto::VarDesc* v = block.FindVar(in);
      proto::OpDesc recv = OpDescBuilder("recv")
                               .Output("Out", in)
                               .Attr("peer", static_cast<int32_t>(StageOf(producer)))
                               .Attr("out_shape", MetaOf(*v).shape)
                               .Attr("dtype", static_cast<int32_t>(v->dtype()))
                               .Attr("ring_id", transfer_ring)
                               .Role(phase | role::kComm);
      recv.set_stream(transfer_stream(/*send=*/false, StageOf(producer)));
      emit(std::move(recv), vs);
      here.insert(in);
    }
    emit(op->desc(), vs);
    for (const std::string& out : op->OutputVars()) here.insert(out);
    for (const std::string& out : op->OutputVars()) {
      if (!transferable(out)) continue;
      for (Op* consumer : block.Consumers(out)) {
        if (!vstage_.count(consumer) || is_shared_sum(consumer)) continue;
        const int peer = StageOf(consumer);
        if (peer == stage_ || sent.count({out, peer})) continue;
        proto::OpDesc send = OpDescBuilder("send")
                                 .Input("X", out)
                                 .Attr("peer", static_cast<int32_t>(peer))
                                 .Attr("ring_id", transfer_ring)
                                 .Role(phase | role::kComm);
        send.set_stream(transfer_stream(/*send=*/true, peer));
        emit(std::move(send), vs);
        sent.insert({out, peer});
      }
    }
  }
  return out;
}

Status PipelineSplitPass::PruneStartup(PassContext& ctx) {
  const Block& startup = std::as_const(ctx).startup().global_block();
  const Block& main = ctx.program().global_block();
  // Keep the ops (back to front) that produce what the rank's program
  // holds, and what those ops read; the kept ops, in order, and their vars
  // make the stage's startup, without copying the whole one first.
  std::unordered_set<std::string> needed;
  for (const auto& [name, var] : main.vars()) {
    if (var.persistable()) needed.insert(name);
  }
  const std::vector<Op*> ops = startup.OpVector();
  std::vector<bool> kept(ops.size(), false);
  for (size_t i = ops.size(); i-- > 0;) {
    const Op* op = ops[i];
    for (const std::string& out : op->OutputVars()) kept[i] = kept[i] || needed.count(out) > 0;
    if (!kept[i]) continue;
    for (const std::string& in : op->InputVars()) needed.insert(in);
  }
  Program pruned;
  Block& dst = pruned.global_block();
  for (const auto& [name, var] : startup.vars()) {
    if (needed.count(name)) *dst.AddVar(name) = var;
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    if (kept[i]) dst.AppendOp(ops[i]->desc());
  }
  ctx.set_startup(std::move(pruned));
  return Status::OK();
}

StatusOr<bool> PipelineSplitPass::Run(PassContext& ctx) {
  ctx.ResolvePpDegree(stages_);
  ctx.resolved().set_vpp_degree(chunks_);
  if (v_shape_ && chunks_ != 2) {
    return InvalidArgument("pipeline-split: v-shape places two chunks on each stage, but chunks is ",
                           chunks_);
  }
  if (stages_ * chunks_ == 1) return false;
  stage_ = ctx.coords().pp;
  // Read in place: the pass builds the stage's program anew, so the whole
  // program is never copied (PassContext reads the planner's in place).
  const Block& block = std::as_const(ctx).program().global_block();
  const std::vector<Op*> ops = block.OpVector();
  if (ops.empty()) return false;
  LOOM_RETURN_IF_ERROR(AssignVirtualStages(ctx, ops));
  LOOM_ASSIGN_OR_RETURN(Program rank_program, BuildRankProgram(block, ops));
  ctx.Explain(kPassName, StrCat("stage ", stage_, " keeps ",
                                rank_program.global_block().num_ops(), " of ",
                                ops.size(), " ops; shared parameters: ",
                                shared_.size()));
  ctx.set_program(std::move(rank_program));
  LOOM_RETURN_IF_ERROR(PruneStartup(ctx));
  return true;
}

}  // namespace

PassInfo PipelineSplitPassInfo() {
  using O = PipelineSplitOptions;
  PassInfo info = PassInfoOf<PipelineSplitPass, O>(
      kPassName,
      "cuts the program into pipeline stages by balanced layer cost and keeps the rank's stage, "
      "with send/recv at the cuts");
  info.options = {IntOption(&O::stages, "stages", "pipeline stages", 1, kMaxPassDegree),
                  IntOption(&O::chunks, "chunks", "model chunks per stage (VPP, ZBV)", 1,
                            kMaxPassDegree),
                  BoolOption(&O::v_shape, "v-shape",
                             "place the chunks in a V (ZBV): down the stages, then back up")};
  return info;
}

}  // namespace loom
