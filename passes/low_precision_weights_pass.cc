// low-precision-weights: a parameter that the forward casts to the compute
// dtype is cast once a step, after its update, into a persistable copy that
// every micro-batch reads.
//
// AMP casts a parameter where an op reads it, so each micro-batch makes
// its own low-precision copy and keeps it until its backward: a pipeline
// stage with eight micro-batches in flight holds eight copies of its
// weights. Megatron holds one (its model's bf16 weights beside the fp32
// main weights of the optimizer); so does the plan after this pass. The
// numbers do not change: the copy made after step k's update is the cast
// step k+1's forward would have made.
//
// A parameter held only in ZeRO-3 shards is gathered for each use: the
// sharding pass casts the shard before each gather, or casts what it
// gathered where it is read; neither is persistable, and both stay.
#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "framework/low_precision.h"
#include "framework/op_builder.h"
#include "framework/shape_inference.h"
#include "passes/amp.h"
#include "passes/parallel_passes.h"

namespace loom {
namespace {

constexpr const char* kPassName = "low-precision-weights";

class LowPrecisionWeightsPass : public Pass {
 public:
  StatusOr<bool> Run(PassContext& ctx) override;
};

// "fc_0.w@BF16".
std::string CopyName(const std::string& param, DataType dtype) {
  std::string suffix = DataTypeName(dtype);
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return StrCat(param, "@", suffix);
}

// The last op that writes `param`, or the flat buffer it lives in (a
// sharded update's fetch writes the buffer); null for a frozen parameter.
Op* LastWriterOf(const Block& block, const proto::VarDesc& param) {
  Op* last = nullptr;
  auto consider = [&](const std::string& var) {
    for (Op* op : block.Producers(var)) {
      if (last == nullptr || op->index() > last->index()) last = op;
    }
  };
  consider(param.name());
  if (param.has_flat()) consider(param.flat().buffer());
  return last;
}

StatusOr<bool> LowPrecisionWeightsPass::Run(PassContext& ctx) {
  Block& block = ctx.program().global_block();
  Block& startup = ctx.startup().global_block();
  // The casts of each (parameter, dtype), in program order.
  std::map<std::pair<std::string, DataType>, std::vector<Op*>> casts;
  for (Op* op : block.ops()) {
    if (op->type() != "cast") continue;
    const proto::VarDesc* x = block.FindVar(op->Input("X"));
    const proto::VarDesc* out = block.FindVar(op->Output("Out"));
    // A ZeRO-3 shard (flat over a ring) is cast by each gather of it.
    if (x == nullptr || out == nullptr || !x->is_parameter() || !x->persistable() ||
        (x->has_flat() && x->flat().shard_ring() >= 0) || out->persistable() ||
        !IsLowPrecision(out->dtype())) {
      continue;
    }
    casts[{x->name(), out->dtype()}].push_back(op);
  }
  // Each parameter's last writer, found before any edit: positions are
  // numbered once, not again after each cast the loop below moves.
  std::map<std::string, Op*> last_writer;
  std::map<const Op*, int> position;  // of each last writer, before any edit
  for (const auto& [key, ops] : casts) {
    Op* writer = LastWriterOf(block, *block.FindVar(key.first));
    last_writer.emplace(key.first, writer);
    if (writer != nullptr) position.emplace(writer, writer->index());
  }
  int64_t copies_bytes = 0;
  int refreshed = 0;
  // Casts of parameters that a fetch writes, by the fetch's position: they
  // go after every update, not after their fetch, or each would hold the
  // calc stream (and the next bucket's update) until its fetch lands, and
  // fetches and updates would take turns instead of overlapping.
  std::vector<std::pair<int, proto::OpDesc>> after_fetches;
  for (const auto& [key, ops] : casts) {
    const auto& [param, dtype] = key;
    const proto::VarDesc& p = *block.FindVar(param);
    const std::string copy = CopyName(param, dtype);
    if (block.HasVar(copy)) {
      return InvalidArgument("var '", copy, "' already exists; ", kPassName,
                             " names its copy of '", param, "' so");
    }
    if (!startup.HasVar(param)) {
      return InvalidArgument("the startup program does not declare parameter '", param,
                             "', whose ", DataTypeName(dtype), " copy it would make");
    }
    for (Block* b : {&block, &startup}) {
      proto::VarDesc* v = b->AddVar(copy);
      SetMeta(TensorMeta{dtype, MetaOf(p).shape}, v);
      v->set_persistable(true);
      v->set_cast_of(param);
    }
    copies_bytes += NumElements(MetaOf(p).shape) * SizeOf(dtype);
    // Every reader of every cast reads the copy instead.
    for (Op* cast : ops) {
      const std::string out = cast->Output("Out");
      const std::vector<Op*> readers = block.Consumers(out);
      for (Op* reader : readers) block.RenameInput(reader, out, copy);
      block.EraseOp(cast);
      if (block.Producers(out).empty() && block.Consumers(out).empty()) block.RemoveVar(out);
    }
    LOOM_RETURN_IF_ERROR(AppendOpInferShapes(startup, CastOp(param, copy, p.dtype(), dtype))
                             .status()
                             .WithContext(StrCat("the startup's copy of ", param)));
    Op* writer = last_writer.at(param);
    if (writer == nullptr) continue;  // frozen: the startup's copy serves every step
    proto::OpDesc refresh = CastOp(param, copy, p.dtype(), dtype);
    refresh.set_role(role::kOptimize);
    refresh.set_pipeline_stage(writer->desc().pipeline_stage());
    refresh.set_chunk(writer->desc().chunk());
    refresh.set_creation_pass(kPassName);
    ++refreshed;
    if (!stream::IsCalc(writer->desc().stream())) {
      // A fetch into the flat buffer names the buffer, not the parameter:
      // data flow does not order the cast after it, an event does.
      const std::string event = StrCat("weights-fetched.", writer->id());
      bool recorded = false;
      for (const std::string& e : writer->desc().record_events()) recorded |= e == event;
      if (!recorded) writer->annotations().add_record_events(event);
      refresh.add_wait_events(event);
      after_fetches.emplace_back(position.at(writer), std::move(refresh));
      continue;
    }
    LOOM_RETURN_IF_ERROR(InsertOpAfterInferShapes(block, writer, std::move(refresh)).status());
  }
  std::stable_sort(after_fetches.begin(), after_fetches.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [position, refresh] : after_fetches) {
    LOOM_RETURN_IF_ERROR(AppendOpInferShapes(block, std::move(refresh)).status());
  }
  if (casts.empty()) return false;
  ctx.Explain(kPassName,
              StrCat(casts.size(), " parameters are cast once a step (", refreshed,
                     " after their update), into persistable copies of ", copies_bytes,
                     " bytes that every micro-batch reads"));
  return true;
}

}  // namespace

PassInfo LowPrecisionWeightsPassInfo() {
  return PassInfoOf<LowPrecisionWeightsPass>(
      kPassName,
      "casts each parameter the forward casts to the compute dtype once a step, after its "
      "update, into a persistable copy every micro-batch reads");
}

}  // namespace loom
