// recompute: activation recomputation (Megatron's recompute_granularity,
// Paddle's recompute pass). A recomputed layer keeps only what its own
// forward does not make (its input, parameters, what the rest of the model
// reads); just before its backward first needs one of the activations it
// made, copies of the forward ops that make them run again, in the backward
// job, writing `<var>@RC`, and the backward reads those. The forward's own
// activations then die within the forward job.
//
//   full:      every forward op of the layer.
//   selective: the attention core only (Korthikanti et al. 2022, 4.2): from
//              the matmul of two activations (QKᵀ) through softmax and
//              dropout to the next one (probabilities times V), which keeps
//              the O(s²) tensors out of memory for a fraction of the FLOPs.
//
// `layers` recomputes only the first that many layers of each model chunk
// the rank holds (Megatron's recompute_num_layers, block method).
//
// The copies are exact: kernels are deterministic and dropout draws its
// mask from (seed, step, row), which the backward job sees as the forward
// did. They are backward ops that make no weight gradient, so the
// split-backward pass puts them in B, never W. They run after
// tensor-parallel and gradient-accumulation and before data-parallel and
// sharding, so that a ZeRO-3 gather finds them as the backward's first
// readers of a parameter.
#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "framework/op_builder.h"
#include "framework/shape_inference.h"
#include "passes/parallel_passes.h"

namespace loom {
namespace {

constexpr const char* kPassName = "recompute";
constexpr const char* kRecomputedSuffix = "@RC";

enum class Granularity { kFull, kSelective };

struct RecomputeOptions {
  Granularity granularity = Granularity::kFull;
  int64_t layers = 0;  // per chunk; 0: all
};

class RecomputePass : public Pass {
 public:
  explicit RecomputePass(const RecomputeOptions& options) : options_(options) {}
  StatusOr<bool> Run(PassContext& ctx) override;

 private:
  RecomputeOptions options_;
};

// Whether `var` holds parameter data: a parameter, or a cast or copy of
// parameters only (AMP's low-precision weight). Memoized.
class ParameterData {
 public:
  explicit ParameterData(const Block& block) : block_(block) {}
  bool Of(const std::string& var) {
    auto it = memo_.find(var);
    if (it != memo_.end()) return it->second;
    bool is = false;
    const proto::VarDesc* desc = block_.FindVar(var);
    if (desc != nullptr && desc->persistable()) {
      is = true;
    } else if (desc != nullptr && !desc->is_data()) {
      const std::vector<Op*>& producers = block_.Producers(var);
      if (producers.size() == 1) {
        const std::vector<std::string> inputs = producers.front()->InputVars();
        is = !inputs.empty() &&
             std::all_of(inputs.begin(), inputs.end(), [&](const std::string& v) { return Of(v); });
      }
    }
    memo_[var] = is;
    return is;
  }

 private:
  const Block& block_;
  std::unordered_map<std::string, bool> memo_;
};

// The attention cores among one layer's forward ops (in program order): each
// from a matmul of two activations through the ops that read what it made,
// up to the next matmul of two activations, which ends it and is part of it.
std::vector<Op*> AttentionCores(const std::vector<Op*>& layer_ops, ParameterData& parameters) {
  auto is_core_matmul = [&](const Op* op) {
    return op->type() == "matmul" && !parameters.Of(op->Input("X")) &&
           !parameters.Of(op->Input("Y"));
  };
  std::vector<Op*> cores;
  std::unordered_set<std::string> made;  // by the open core
  bool open = false;
  for (Op* op : layer_ops) {
    bool reads_core = false;
    for (const std::string& v : op->InputVars()) reads_core |= made.count(v) > 0;
    if (!open && !is_core_matmul(op)) continue;
    if (open && !reads_core) continue;
    cores.push_back(op);
    if (open && is_core_matmul(op)) {  // times V: the core ends here
      open = false;
      made.clear();
      continue;
    }
    open = true;
    for (const std::string& v : op->OutputVars()) made.insert(v);
  }
  return cores;
}

StatusOr<bool> RecomputePass::Run(PassContext& ctx) {
  Block& block = ctx.program().global_block();
  const std::vector<Op*> ops = block.OpVector();

  // The forward ops of each layer, and the layers of each chunk.
  std::map<int, std::vector<Op*>> layer_ops;
  std::map<int, std::set<int>> chunk_layers;
  std::vector<Op*> backward;
  for (Op* op : ops) {
    if (op->HasRole(role::kBackward)) backward.push_back(op);
    if (!op->HasRole(role::kForward) || op->desc().layer() < 0) continue;
    layer_ops[op->desc().layer()].push_back(op);
    chunk_layers[std::max(0, op->desc().chunk())].insert(op->desc().layer());
  }
  std::vector<int> chosen;
  for (const auto& [chunk, layers] : chunk_layers) {
    int taken = 0;
    for (int layer : layers) {
      if (options_.layers > 0 && taken == options_.layers) break;
      chosen.push_back(layer);
      ++taken;
    }
  }

  // Where each backward op stands, to find a layer's first reader.
  std::unordered_map<const Op*, size_t> backward_index;
  for (size_t i = 0; i < backward.size(); ++i) backward_index[backward[i]] = i;
  ParameterData parameters(block);
  int copied = 0, layers_done = 0;
  int64_t freed_bytes = 0;
  for (int layer : chosen) {
    const std::vector<Op*>& in_layer = layer_ops[layer];
    const std::vector<Op*> group = options_.granularity == Granularity::kFull
                                       ? in_layer
                                       : AttentionCores(in_layer, parameters);
    std::unordered_set<std::string> made_in_group;
    for (const Op* op : group) {
      for (const std::string& v : op->OutputVars()) made_in_group.insert(v);
    }
    // A var the rest of the model's forward reads (the layer's output, the
    // next layer's checkpoint) is kept anyway: not worth making twice.
    auto escapes = [&](const std::string& var) {
      const proto::VarDesc* desc = block.FindVar(var);
      if (desc == nullptr || desc->persistable() || desc->is_data()) return true;
      for (const Op* reader : block.Consumers(var)) {
        if (reader->HasRole(role::kForward) && reader->desc().layer() != layer) return true;
      }
      return false;
    };
    // What the backward reads of the group's vars: these are made again.
    std::unordered_set<std::string> remade;
    size_t first_reader = backward.size();
    for (const Op* op : group) {
      for (const std::string& v : op->OutputVars()) {
        if (v.empty() || escapes(v)) continue;
        for (const Op* reader : block.Consumers(v)) {
          auto at = backward_index.find(reader);
          if (at == backward_index.end()) continue;
          remade.insert(v);
          first_reader = std::min(first_reader, at->second);
        }
      }
    }
    if (remade.empty()) continue;
    // The ops that make them, and what those read from the group, back to
    // what the group does not make (kept).
    std::unordered_set<std::string> needed = remade;
    std::vector<const Op*> copies;
    for (auto it = group.rbegin(); it != group.rend(); ++it) {
      const Op* op = *it;
      const std::vector<std::string> outs = op->OutputVars();
      if (std::none_of(outs.begin(), outs.end(),
                       [&](const std::string& v) { return needed.count(v) > 0; })) {
        continue;
      }
      for (const std::string& v : outs) {
        const proto::VarDesc* desc = block.FindVar(v);
        if (desc != nullptr && desc->persistable()) {
          return FailedPrecondition(op->Location(), " writes persistable var '", v,
                                    "', so layer ", layer, " cannot be recomputed");
        }
      }
      copies.push_back(op);
      for (const std::string& v : op->InputVars()) {
        if (made_in_group.count(v) && !escapes(v)) needed.insert(v);
      }
    }
    std::reverse(copies.begin(), copies.end());

    // Copies go before the first reader, in forward order, reading one
    // another's outputs.
    const Op* before = backward[first_reader];
    std::unordered_set<std::string> renamed;
    for (const Op* op : copies) {
      proto::OpDesc d = op->desc();
      d.set_id(0);
      d.set_forward_id(op->id());
      d.set_role(role::kBackward);
      d.clear_param_grads();
      d.set_creation_pass(kPassName);
      for (auto& slot : *d.mutable_inputs()) {
        for (auto& v : *slot.mutable_vars()) {
          if (renamed.count(v)) v += kRecomputedSuffix;
        }
      }
      for (auto& slot : *d.mutable_outputs()) {
        for (auto& v : *slot.mutable_vars()) {
          if (v.empty()) continue;
          const std::string copy = v + kRecomputedSuffix;
          if (!block.HasVar(copy)) {
            proto::VarDesc var = *block.FindVar(v);
            var.set_name(copy);
            *block.AddVar(copy) = var;
          }
          renamed.insert(v);
          v = copy;
        }
      }
      block.InsertOpBefore(before, std::move(d));
      ++copied;
    }
    for (const std::string& v : remade) {
      for (Op* reader : std::vector<Op*>(block.Consumers(v))) {
        if (!reader->HasRole(role::kBackward) || reader->desc().creation_pass() == kPassName) {
          continue;
        }
        block.RenameInput(reader, v, v + kRecomputedSuffix);
      }
      const TensorMeta meta = MetaOf(*block.FindVar(v));
      freed_bytes += NumElements(meta.shape) * SizeOf(meta.dtype);
    }
    ++layers_done;
  }
  ctx.Explain(kPassName,
              StrCat(layers_done, " of ", layer_ops.size(), " layers recomputed (",
                     options_.granularity == Granularity::kFull ? "full" : "selective", "), ",
                     copied, " forward ops copied into the backward; ", freed_bytes,
                     " bytes a micro-batch no longer kept from forward to backward"));
  return copied > 0;
}

}  // namespace

PassInfo RecomputePassInfo() {
  using O = RecomputeOptions;
  PassInfo info = PassInfoOf<RecomputePass, O>(
      kPassName, "recomputes layers' activations in the backward instead of keeping them");
  info.options = {
      EnumOption(&O::granularity, "granularity",
                 "full: every forward op of a layer; selective: the attention core",
                 std::vector<std::pair<std::string, Granularity>>{
                     {"full", Granularity::kFull}, {"selective", Granularity::kSelective}}),
      IntOption(&O::layers, "layers",
                "the first this many layers of each chunk the rank holds (0: all)", 0,
                kMaxWorldSize)};
  return info;
}

}  // namespace loom
