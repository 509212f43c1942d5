#include "passes/sharding_gathers.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "framework/low_precision.h"
#include "framework/op_builder.h"
#include "framework/op_registry.h"
#include "framework/shape_inference.h"
#include "passes/amp.h"
#include "passes/weight_gradients.h"
#include "scheduler/layout.h"

namespace loom {
namespace {

constexpr const char* kPassName = "sharding";
constexpr const char* kRegathered = "@REGATHER";
constexpr const char* kRecast = "@RECAST";

// Where a phase reads a bucket: its first and last reader, as positions in
// the phase's ops.
struct Reads {
  int first = -1;
  int last = -1;
};

// The ops of one forward or backward phase of one VPP chunk, in program
// order, and where they read each bucket.
struct Phase {
  bool backward = false;
  int chunk = 0;
  std::vector<Op*> ops;
  std::map<int, Reads> reads;  // bucket index -> its reads
};

// Declares `name`, a temporary placed in `buffer` at `offset` as `like`.
void DeclareMember(Block& block, const std::string& name, const proto::VarDesc& like,
                   const std::string& buffer) {
  proto::VarDesc* v = block.AddVar(name);
  *v = like;
  v->set_name(name);
  v->set_persistable(false);
  v->set_is_parameter(false);
  v->mutable_flat()->set_buffer(buffer);
}

// A bucket as the gathers see it: under AMP, possibly gathered in the
// compute dtype (see below).
struct Gathered {
  GatheredBucket bucket;
  // Where the bucket is gathered in a low dtype: the rank's fp32 shard,
  // which each gather casts into `bucket.shard` first; else empty.
  std::string cast_from;
};

// The one low dtype every forward and backward reader of `param` casts it
// to, reading nothing else of it; nullopt where any reads it as it is. The
// update's read does not count: the sharding pass updates the shard.
std::optional<DataType> OnlyReadCast(const Block& block, const std::string& param) {
  std::optional<DataType> to;
  for (const Op* op : block.Consumers(param)) {
    if (op->HasRole(role::kOptimize)) continue;
    if (op->type() != "cast") return std::nullopt;
    const proto::VarDesc* out = block.FindVar(op->Output("Out"));
    if (out == nullptr || out->persistable() || !IsLowPrecision(out->dtype()) ||
        (to && *to != out->dtype())) {
      return std::nullopt;
    }
    to = out->dtype();
  }
  return to;
}

}  // namespace

std::optional<DataType> LowGatherDtype(const Block& block, const std::vector<std::string>& params) {
  std::optional<DataType> to;
  for (const std::string& p : params) {
    const std::optional<DataType> read = OnlyReadCast(block, p);
    if (!read || (to && *to != *read)) return std::nullopt;
    to = read;
  }
  return to;
}

namespace {

// Gathers in its low dtype each bucket that has one (its parameters are
// read only through casts to it, GatheredBucket::low_dtype): the casts go, their readers read the first cast's
// output (`w.cast_bf16`), which becomes a member of a low-precision copy
// of the bucket's buffer, and each gather casts the rank's shard into a
// low-precision shard and gathers that. The member views are what the
// casts made, so the values do not change.
Status GatherInComputeDtype(PassContext& ctx, std::vector<Gathered>& buckets) {
  Block& block = ctx.program().global_block();
  int lowered = 0;
  int64_t fp32_bytes = 0, low_bytes = 0;  // of the buckets gathered low, once each
  std::string dtype_name;
  for (Gathered& g : buckets) {
    GatheredBucket& b = g.bucket;
    const std::optional<DataType> to = b.low_dtype;
    if (!to) {
      if (b.once) return Internal("bucket ", b.buffer, " is gathered once but read in fp32");
      continue;
    }
    const proto::VarDesc& whole = *block.FindVar(b.buffer);
    const proto::VarDesc& shard = *block.FindVar(b.shard);
    const std::string suffix = StrCat(".", DataTypeName(*to));
    GatheredBucket low;
    low.buffer = b.buffer + suffix;
    low.shard = b.shard + suffix;
    low.by_all_reduce = b.by_all_reduce;
    low.once = b.once;
    low.low_dtype = to;
    const std::pair<std::string, const proto::VarDesc*> declared[] = {{low.buffer, &whole},
                                                                       {low.shard, &shard}};
    for (const auto& [name, like] : declared) {
      if (block.HasVar(name)) {
        return InvalidArgument("var '", name, "' already exists; ", kPassName, " names the ",
                               DataTypeName(*to), " copy of '", like->name(), "' so");
      }
      proto::VarDesc* v = block.AddVar(name);
      SetMeta(TensorMeta{*to, MetaOf(*like).shape}, v);
      v->set_persistable(false);
    }
    if (b.once) {
      proto::VarDesc* v = block.FindVar(low.buffer);
      v->set_persistable(true);
      v->set_cast_of(b.buffer);
    }
    for (const std::string& p : b.params) {
      std::vector<Op*> casts = block.Consumers(p);
      std::sort(casts.begin(), casts.end(),
                [](const Op* x, const Op* y) { return x->index() < y->index(); });
      const std::string view = casts.front()->Output("Out");
      for (Op* cast : casts) {
        const std::string out = cast->Output("Out");
        for (Op* reader : std::vector<Op*>(block.Consumers(out))) {
          block.RenameInput(reader, out, view);
        }
        block.EraseOp(cast);
        if (out != view) block.RemoveVar(out);
      }
      proto::VarDesc* v = block.FindVar(view);
      v->mutable_flat()->set_buffer(low.buffer);
      v->mutable_flat()->set_offset(block.FindVar(p)->flat().offset());
      if (b.once) {
        v->set_persistable(true);
        v->set_cast_of(p);
      }
      low.params.push_back(view);
    }
    ++lowered;
    fp32_bytes += NumElements(MetaOf(whole).shape) * SizeOf(whole.dtype());
    low_bytes += NumElements(MetaOf(whole).shape) * SizeOf(*to);
    dtype_name = DataTypeName(*to);
    g.cast_from = b.shard;
    b = std::move(low);
  }
  if (lowered > 0) {
    ctx.Explain(kPassName, StrCat(lowered, " of ", buckets.size(), " gathered buckets are "
                                  "gathered in ", dtype_name, ", which every reader casts them "
                                  "to: ", low_bytes, " bytes a gather of each instead of ",
                                  fp32_bytes, lowered < static_cast<int>(buckets.size())
                                                  ? "; the rest hold parameters read as they are"
                                                  : ""));
  }
  return Status::OK();
}

// Under AMP the forward computes with casts of the parameters
// (`w.cast_bf16`), and the backward reads those casts again (matmul_grad's
// Y). Kept from one to the other, every micro-batch in flight would hold
// its own low-precision copy of each weight, which is what stage 3 exists
// to avoid: the backward casts its own copy, from the parameter it gathers
// again, before its first read (per VPP chunk). The values are the same.
Status RecastParametersInBackward(PassContext& ctx,
                                  const std::unordered_map<std::string, int>& bucket_of) {
  Block& block = ctx.program().global_block();
  std::unordered_map<std::string, const Op*> cast_of;  // a forward cast's output -> the cast
  for (Op* op : block.OpVector()) {
    if (op->type() == "cast" && op->HasRole(role::kForward) && !op->HasRole(role::kBackward) &&
        bucket_of.count(op->Input("X")) > 0) {
      cast_of[op->Output("Out")] = op;
    }
  }
  if (cast_of.empty()) return Status::OK();
  std::map<std::pair<int32_t, std::string>, std::string> recast;  // (chunk, cast) -> its copy
  for (Op* op : block.OpVector()) {
    if (!op->HasRole(role::kBackward)) continue;
    const OpSchema* schema = OpRegistry::Global().Find(op->type());
    for (const auto& slot : std::vector<proto::OpDesc::Slot>(op->desc().inputs().begin(),
                                                             op->desc().inputs().end())) {
      // A read of the meta alone (a bias gradient's) keeps no buffer alive.
      if (!ReadsInputData(schema, *op, slot.name())) continue;
      std::vector<std::string> vars(slot.vars().begin(), slot.vars().end());
      bool renamed = false;
      for (std::string& v : vars) {
        auto cast = cast_of.find(v);
        if (cast == cast_of.end()) continue;
        auto [it, added] = recast.try_emplace({op->desc().chunk(), v});
        if (added) {
          it->second = StrCat(v, kRecast, op->desc().chunk() > 0 ? StrCat(".", op->desc().chunk())
                                                                : std::string());
          proto::VarDesc* copy = block.AddVar(it->second);
          *copy = *block.FindVar(v);
          copy->set_name(it->second);
          const proto::OpDesc& forward = cast->second->desc();
          proto::OpDesc desc = OpDescBuilder("cast")
                                   .Input("X", cast->second->Input("X"))
                                   .Output("Out", it->second)
                                   .Role(role::kBackward);
          *desc.mutable_attrs() = forward.attrs();
          desc.set_pipeline_stage(op->desc().pipeline_stage());
          desc.set_chunk(op->desc().chunk());
          desc.set_layer(forward.layer());
          desc.set_forward_id(forward.id());
          desc.set_creation_pass(kPassName);
          LOOM_RETURN_IF_ERROR(InsertOpInferShapes(block, op, std::move(desc)).status());
        }
        v = it->second;
        renamed = true;
      }
      if (renamed) block.SetInputs(op, slot.name(), vars);
    }
  }
  if (!recast.empty()) {
    ctx.Explain(kPassName, StrCat("the backward casts ", recast.size(), " gathered parameters "
                                  "again (", recast.begin()->second, ", ...) rather than keep "
                                  "the forward's casts for it"));
  }
  return Status::OK();
}

// The flat_split that hands out a gathered bucket's parameters as views
// of `whole`, under their names with `suffix`.
proto::OpDesc HandOut(const Block& block, const GatheredBucket& bucket, const std::string& whole,
                      const std::string& suffix, int32_t role) {
  std::vector<int64_t> offsets, dims;
  std::vector<int32_t> ranks;
  std::vector<std::string> outs;
  for (const std::string& p : bucket.params) {
    const proto::VarDesc* v = block.FindVar(p);
    offsets.push_back(v->flat().offset());
    ranks.push_back(v->shape_size());
    dims.insert(dims.end(), v->shape().begin(), v->shape().end());
    outs.push_back(p + suffix);
  }
  return OpDescBuilder("flat_split")
      .Input("X", whole)
      .Output("Out", outs)
      .Attr("offsets", offsets)
      .Attr("dims", dims)
      .Attr("ranks", ranks)
      .Role(role);
}

// Has the phase's first reader of each of `bucket`'s parameters wait on
// `event`. In the micro-batches after the first the gather does nothing,
// and the event orders the readers after the first's.
void WaitForTheGather(const Phase& phase, const GatheredBucket& bucket,
                      const std::string& event) {
  std::set<std::string> unread(bucket.params.begin(), bucket.params.end());
  for (Op* op : phase.ops) {
    bool reads = false;
    for (const std::string& in : op->InputVars()) reads |= unread.erase(in) > 0;
    if (reads) op->annotations().add_wait_events(event);
    if (unread.empty()) return;
  }
}

// Each forward and backward phase of each chunk, keyed (backward, chunk),
// with where it reads each bucket (`bucket_of`: parameter -> bucket). An
// optimizer op that reads a parameter is refused: ZeRO 3 holds parameters
// whole only while forward and backward run.
using PhaseMap = std::map<std::pair<bool, int>, Phase>;
StatusOr<PhaseMap> PhasesOf(Block& block, const std::unordered_map<std::string, int>& bucket_of) {
  PhaseMap phases;
  for (Op* op : block.OpVector()) {
    std::vector<int> read;
    for (const std::string& in : op->InputVars()) {
      auto it = bucket_of.find(in);
      if (it == bucket_of.end()) continue;
      if (op->HasRole(role::kOptimize)) {
        return Unimplemented(op->Location(), ": reads parameter '", in, "', which ZeRO stage 3 "
                             "holds whole only while forward and backward run");
      }
      read.push_back(it->second);
    }
    if (op->HasRole(role::kOptimize)) continue;
    const bool backward = op->HasRole(role::kBackward);
    Phase& phase = phases[{backward, op->desc().chunk()}];
    phase.backward = backward;
    phase.chunk = op->desc().chunk();
    const int at = static_cast<int>(phase.ops.size());
    phase.ops.push_back(op);
    for (int b : read) {
      Reads& r = phase.reads[b];
      if (r.first < 0) r.first = at;
      r.last = at;
    }
  }
  return phases;
}

// The backward reads its own copies of the parameters of the buckets in
// `order` (kRegathered), gathered again for it: declares them and renames
// its reads, but for bucket `kept` and the buckets gathered once a step.
void ReadOwnCopiesInBackward(Block& block, const Phase& phase, const std::vector<int>& order,
                             const std::vector<GatheredBucket>& buckets,
                             const std::unordered_map<std::string, int>& bucket_of, int kept) {
  for (int b : order) {
    if (b == kept) continue;
    const GatheredBucket& bucket = buckets[b];
    const std::string buffer = bucket.buffer + kRegathered;
    if (block.FindVar(buffer) == nullptr) {
      proto::VarDesc* v = block.AddVar(buffer);
      *v = *block.FindVar(bucket.buffer);
      v->set_name(buffer);
    }
    for (const std::string& p : bucket.params) {
      if (block.FindVar(p + kRegathered) == nullptr) {
        DeclareMember(block, p + kRegathered, *block.FindVar(p), buffer);
      }
    }
  }
  for (Op* op : phase.ops) {
    for (const auto& slot : std::vector<proto::OpDesc::Slot>(op->desc().inputs().begin(),
                                                             op->desc().inputs().end())) {
      std::vector<std::string> vars(slot.vars().begin(), slot.vars().end());
      bool renamed = false;
      for (std::string& v : vars) {
        auto it = bucket_of.find(v);
        if (it != bucket_of.end() && it->second != kept && !buckets[it->second].once) {
          v += kRegathered;
          renamed = true;
        }
      }
      if (renamed) block.SetInputs(op, slot.name(), vars);
    }
  }
}

// The ops that gather `g`'s bucket for `phase`, whose first reader of it is
// `first_reader`: the cast of the rank's shard where the gather is in a low
// dtype, the all-gather (or the zero-filled all-reduce), and the hand-out
// of the parameters as views, or for a bucket gathered once a step the
// event its readers wait on.
std::vector<proto::OpDesc> GatherOps(Block& block, const Phase& phase, const Gathered& g,
                                     const Op& first_reader, RingId ring, int nranks) {
  const GatheredBucket& bucket = g.bucket;
  const std::string suffix = phase.backward ? kRegathered : "";
  const int32_t phase_role = phase.backward ? role::kBackward : role::kForward;
  const std::string whole = bucket.buffer + suffix;
  std::vector<proto::OpDesc> ops;
  std::string shard = bucket.shard;
  if (!g.cast_from.empty()) {
    // The low-precision shard, made for this gather.
    shard += suffix;
    const proto::VarDesc* low = block.FindVar(bucket.shard);
    if (block.FindVar(shard) == nullptr) {
      proto::VarDesc* v = block.AddVar(shard);
      *v = *low;
      v->set_name(shard);
    }
    ops.push_back(CastOp(g.cast_from, shard, block.FindVar(g.cast_from)->dtype(), low->dtype()));
    ops.back().set_role(phase_role);
  }
  if (bucket.by_all_reduce) {
    const proto::VarDesc* w = block.FindVar(bucket.buffer);
    ops.push_back(OpDescBuilder("fill_constant")
                      .Output("Out", whole)
                      .Attr("shape", Shape{w->shape(0)})
                      .Attr("dtype", static_cast<int32_t>(w->dtype()))
                      .Attr("value", 0.0f)
                      .Role(phase_role));
    ops.push_back(OpDescBuilder("allreduce")
                      .Input("X", whole)
                      .Input("Part", shard)
                      .Output("Out", whole)
                      .Attr("ring_id", static_cast<int32_t>(ring))
                      .Attr("reduce_op", std::string("sum"))
                      .Attr("fetch_parts", static_cast<int32_t>(nranks))
                      .Role(phase_role | role::kComm));
  } else {
    ops.push_back(OpDescBuilder("allgather")
                      .Input("X", shard)
                      .Output("Out", whole)
                      .Attr("ring_id", static_cast<int32_t>(ring))
                      .Attr("nranks", static_cast<int32_t>(nranks))
                      .Role(phase_role | role::kComm));
  }
  if (bucket.once) {
    // The parameters are views of the persistable buffer already
    // (VarDesc.flat), which the gather writes in place; an event, not
    // the data flow, orders their readers after it.
    ops.back().add_record_events(StrCat(whole, ".gathered"));
    WaitForTheGather(phase, bucket, StrCat(whole, ".gathered"));
  } else {
    ops.push_back(HandOut(block, bucket, whole, suffix, phase_role));
  }
  for (proto::OpDesc& d : ops) {
    d.set_stream(stream::kSharding);
    d.set_first_micro_batch_only(bucket.once);
    d.set_pipeline_stage(first_reader.desc().pipeline_stage());
    d.set_chunk(first_reader.desc().chunk());
    d.set_creation_pass(kPassName);
  }
  return ops;
}

}  // namespace

Status InsertParameterGathers(PassContext& ctx, const std::vector<GatheredBucket>& fp32_buckets,
                              int nranks, RingId ring, int depth) {
  Block& block = ctx.program().global_block();
  std::vector<Gathered> gathered;
  for (const GatheredBucket& b : fp32_buckets) gathered.push_back({b, ""});
  LOOM_RETURN_IF_ERROR(GatherInComputeDtype(ctx, gathered));
  std::vector<GatheredBucket> buckets;
  for (const Gathered& g : gathered) buckets.push_back(g.bucket);
  std::unordered_map<std::string, int> bucket_of;
  for (size_t i = 0; i < buckets.size(); ++i) {
    for (const std::string& p : buckets[i].params) bucket_of[p] = static_cast<int>(i);
  }
  LOOM_RETURN_IF_ERROR(RecastParametersInBackward(ctx, bucket_of));
  LOOM_ASSIGN_OR_RETURN(PhaseMap phases, PhasesOf(block, bucket_of));

  const std::unordered_set<std::string> weight_grads = WeightGradients(block);
  int events = 0;
  std::map<int, int> last_forward;  // chunk -> the bucket its forward reads last
  // Forward phases come first (the key's false < true).
  for (auto& entry : phases) {
    Phase& phase = entry.second;  // a reference, which lambdas may capture
    if (phase.reads.empty()) continue;
    std::vector<int> order;
    for (const auto& [b, r] : phase.reads) order.push_back(b);
    std::sort(order.begin(), order.end(), [&](int x, int y) {
      return phase.reads[x].first < phase.reads[y].first;
    });
    if (!phase.backward) {
      last_forward[phase.chunk] = *std::max_element(order.begin(), order.end(), [&](int x, int y) {
        return phase.reads[x].last < phase.reads[y].last;
      });
    } else {
      // A bucket gathered once a step is read where the forward gathered it.
      order.erase(std::remove_if(order.begin(), order.end(),
                                 [&](int b) { return buckets[b].once; }),
                  order.end());
      if (order.empty()) continue;
    }
    // The bucket the forward reads last and the backward first (the
    // output layer's) stays gathered from one to the other, as FSDP's
    // root does: the backward would otherwise start on a gather with
    // nothing to hide it.
    auto last = last_forward.find(phase.chunk);
    const int kept = phase.backward && last != last_forward.end() && last->second == order[0]
                         ? order[0]
                         : -1;
    const std::string suffix = phase.backward ? kRegathered : "";
    if (phase.backward) ReadOwnCopiesInBackward(block, phase, order, buckets, bucket_of, kept);
    // Gathers with the same trigger go after it in bucket order; those
    // with none, before the phase's first read.
    std::map<const Op*, Op*> cursor;
    Op* head = nullptr;
    for (size_t i = 0; i < order.size(); ++i) {
      if (order[i] == kept) continue;
      const GatheredBucket& bucket = buckets[order[i]];
      const Reads& reads = phase.reads[order[i]];
      int trigger = -1;
      // A bucket gathered once a step is held for the step anyway: its
      // gather need not wait for memory to come free.
      if (static_cast<int>(i) > depth && !bucket.once) {
        trigger = std::min(phase.reads[order[i - 1 - depth]].last, reads.first - 1);
        // Split-backward may put such an op in the W half, which a
        // zero-bubble schedule runs later than the B half that gathers.
        while (trigger >= 0 && OnlyWeightGradients(*phase.ops[trigger], weight_grads)) --trigger;
      }
      const std::string whole = bucket.buffer + suffix;
      std::vector<proto::OpDesc> ops =
          GatherOps(block, phase, gathered[order[i]], *phase.ops[reads.first], ring, nranks);
      // Where the ops go: after the trigger (and the gathers it already
      // starts), or before the phase's first read.
      Op** after = nullptr;
      if (trigger >= 0) {
        Op* t = phase.ops[trigger];
        const std::string event = StrCat(whole, ".gather.", events++);
        t->annotations().add_record_events(event);
        ops.front().add_wait_events(event);
        after = &cursor.emplace(t, t).first->second;
      } else if (head != nullptr) {
        after = &head;
      } else {
        LOOM_ASSIGN_OR_RETURN(head, InsertOpInferShapes(block, phase.ops[phase.reads[order[0]].first],
                                                        std::move(ops.front())));
        ops.erase(ops.begin());
        after = &head;
      }
      for (proto::OpDesc& d : ops) {
        LOOM_ASSIGN_OR_RETURN(*after, InsertOpAfterInferShapes(block, *after, std::move(d)));
      }
    }
    ctx.Explain(kPassName,
                StrCat(phase.backward ? "backward" : "forward",
                       phase.chunk > 0 ? StrCat(" of chunk ", phase.chunk) : std::string(), ": ",
                       order.size() - (kept >= 0), " buckets gathered before use, ", depth,
                       " ahead of the one being read",
                       kept >= 0 ? StrCat("; ", buckets[kept].buffer,
                                          " stays gathered from the forward")
                                 : std::string()));
  }
  return Status::OK();
}

}  // namespace loom
