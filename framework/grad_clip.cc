#include "framework/grad_clip.h"

#include <algorithm>
#include <limits>
#include <set>

#include "framework/op_builder.h"
#include "framework/optimizer.h"
#include "framework/shape_inference.h"

namespace loom {

proto::OpDesc SquaredNormOp(const std::vector<GradNormTerm>& terms, const std::string& out) {
  std::vector<std::string> x;
  std::vector<int64_t> segments;
  std::vector<int32_t> rings;
  bool whole = true, parts = false;
  for (const GradNormTerm& t : terms) {
    whole = whole && t.ranges.empty();
    parts = parts || t.part_ring >= 0;
  }
  for (size_t i = 0; i < terms.size(); ++i) {
    const GradNormTerm& t = terms[i];
    x.push_back(t.grad);
    rings.push_back(t.part_ring);
    if (whole) continue;
    // A part's whole extent is the buffer's, which the op does not know:
    // every part term names its ranges (GradClipPass does).
    if (t.ranges.empty()) {
      segments.insert(segments.end(), {static_cast<int64_t>(i), 0, -1});
      continue;
    }
    for (const auto& [begin, end] : t.ranges) {
      segments.insert(segments.end(), {static_cast<int64_t>(i), begin, end});
    }
  }
  OpDescBuilder b("squared_l2_norm");
  b.Input("X", x).Output("Out", out).Role(role::kOptimize);
  if (!whole) b.Attr("segments", segments);
  if (parts) b.Attr("part_rings", rings);
  return b.Build();
}

std::vector<proto::OpDesc> GradScaleOps(const GradScaling& scaling) {
  OpDescBuilder scale("grad_scale");
  scale.Input("SquaredNorm", kGradSquaredNormVar)
      .Output("Scale", kGradScaleVar)
      .Output("Norm", kGradNormVar)
      .Attr("max_norm", scaling.max_norm)
      .Role(role::kOptimize);
  if (!scaling.loss_scaling) return {scale.Build()};
  scale.Input("LossScale", kLossScaleVar);
  return {scale.Build(), OpDescBuilder("update_loss_scale")
                             .Input("SquaredNorm", kGradSquaredNormVar)
                             .Input("LossScale", kLossScaleVar)
                             .Input("GoodSteps", kLossScaleGoodStepsVar)
                             .Output("LossScaleOut", kLossScaleVar)
                             .Output("GoodStepsOut", kLossScaleGoodStepsVar)
                             .Attr("growth_interval", scaling.growth_interval)
                             .Role(role::kOptimize)
                             .Build()};
}

bool IsParameterUpdate(const Op& op) {
  return op.HasRole(role::kOptimize) && !op.HasRole(role::kComm) && op.HasInput("Param") &&
         op.HasInput("Grad") && op.HasOutput("ParamOut");
}

Status AddSerialGradClip(Block& block, const GradScaling& scaling) {
  std::vector<Op*> updates;
  std::vector<GradNormTerm> terms;
  for (Op* op : block.ops()) {
    if (!IsParameterUpdate(*op)) continue;
    updates.push_back(op);
    terms.push_back(GradNormTerm{op->Input("Grad"), {}, -1});
  }
  if (updates.empty()) return InvalidArgument("gradient clipping: the program updates nothing");
  const Op* first = updates.front();
  std::vector<proto::OpDesc> section = {SquaredNormOp(terms, kGradSquaredNormVar)};
  for (proto::OpDesc& d : GradScaleOps(scaling)) section.push_back(std::move(d));
  for (proto::OpDesc& d : section) {
    LOOM_RETURN_IF_ERROR(InsertOpInferShapes(block, first, std::move(d)).status());
  }
  for (Op* u : updates) block.SetInputs(u, "GradScale", {kGradScaleVar});
  return Status::OK();
}

Status DeclareLossScaleState(Program& main, Program& startup, float init_loss_scale) {
  struct State {
    const char* name;
    TensorMeta meta;
    float value;
  };
  for (const State& s : {State{kLossScaleVar, {proto::FP32, {}}, init_loss_scale},
                         State{kLossScaleGoodStepsVar, {proto::INT64, {1}}, 0.0f}}) {
    if (!startup.global_block().HasVar(s.name)) {
      LOOM_RETURN_IF_ERROR(
          AddOptimizerState(main, startup, s.name, s.meta.shape, s.value, s.meta.dtype));
    } else if (!main.global_block().HasVar(s.name)) {
      main.global_block().CopyVarFrom(startup.global_block(), s.name);
    }
  }
  return Status::OK();
}

std::optional<float> InitialLossScale(const Program& startup) {
  for (const Op* op : startup.global_block().ops()) {
    if (op->type() == "fill_constant" && op->Output("Out") == kLossScaleVar) {
      return op->GetAttr<float>("value");
    }
  }
  return std::nullopt;
}

bool HasGradClip(const Program& program) {
  for (const Op* op : program.global_block().ops()) {
    if (op->type() == "grad_scale") return true;
  }
  return false;
}

StatusOr<GradScaling> TakeGradClip(Program& program) {
  Block& block = program.global_block();
  GradScaling scaling;
  std::vector<Op*> section;
  for (Op* op : block.ops()) {
    const bool norm_reduce =
        op->HasRole(role::kComm) && op->HasInput("X") && op->Input("X") == kGradSquaredNormVar;
    if (op->type() == "grad_scale") {
      scaling.max_norm = op->GetAttr<float>("max_norm");
      scaling.loss_scaling = op->HasInput("LossScale");
      section.push_back(op);
    } else if (op->type() == "update_loss_scale") {
      scaling.growth_interval = op->GetAttr<int64_t>("growth_interval");
      section.push_back(op);
    } else if (op->type() == "squared_l2_norm" || norm_reduce) {
      section.push_back(op);
    }
  }
  for (Op* op : section) block.EraseOp(op);
  for (Op* op : block.OpVector()) {
    if (IsParameterUpdate(*op) && op->HasInput("GradScale")) block.SetInputs(op, "GradScale", {});
  }
  for (const char* var : {kGradSquaredNormVar, kGradScaleVar, kGradNormVar}) {
    block.RemoveVar(var);
  }
  return scaling;
}

StatusOr<std::vector<NormRange>> LocalNormRanges(const proto::OpDesc& op,
                                                 const std::vector<int64_t>& input_sizes,
                                                 const std::vector<int>* ring_places) {
  const int n = static_cast<int>(input_sizes.size());
  const std::vector<int64_t> segments =
      AttrValue<std::vector<int64_t>>::Get(*FindAttrOrDefault(op, "segments"));
  const std::vector<int32_t> rings =
      AttrValue<std::vector<int32_t>>::Get(*FindAttrOrDefault(op, "part_rings"));
  std::vector<NormRange> out;
  if (segments.empty()) {
    for (int i = 0; i < n; ++i) {
      if (!rings.empty() && rings[i] >= 0) {
        return InvalidArgument("X[", i, "] is a part over ring ", rings[i],
                               " but the op names no segments for it");
      }
      out.push_back(NormRange{i, 0, input_sizes[i]});
    }
    return out;
  }
  for (size_t s = 0; s + 2 < segments.size(); s += 3) {
    const int i = static_cast<int>(segments[s]);
    if (i < 0 || i >= n) return InvalidArgument("segment ", s / 3, " names input ", i);
    const int64_t size = input_sizes[i];
    const bool part = !rings.empty() && rings[i] >= 0;
    // End -1: to the end of the input, or of a part's whole buffer.
    int64_t begin = segments[s + 1];
    int64_t end = segments[s + 2] >= 0 ? segments[s + 2]
                                       : (part ? std::numeric_limits<int64_t>::max() : size);
    if (part) {
      const int ring = rings[i];
      const int index = ring_places != nullptr && ring < static_cast<int>(ring_places->size())
                            ? (*ring_places)[ring]
                            : -1;
      if (index < 0) {
        return FailedPrecondition("X[", i, "] is a part over ring ", rings[i],
                                  ", which this rank is not on");
      }
      const int64_t part = index * size;
      begin = std::max(begin, part) - part;
      end = std::min(end, part + size) - part;
    }
    if (end > size) {
      return InvalidArgument("segment ", s / 3, " ends at ", end, " past X[", i, "]'s ", size,
                             " elements");
    }
    if (begin < end) out.push_back(NormRange{i, begin, end});
  }
  return out;
}

}  // namespace loom
