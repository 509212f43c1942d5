#include <algorithm>
#include <map>
#include <tuple>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "framework/op_registry.h"
#include "framework/op_view.h"
#include "framework/op_work.h"
#include "framework/shape_inference.h"
#include "scheduler/execution_graph.h"

namespace loom {
namespace {

// What lowering needs of one op, computed once however many jobs run it.
struct OpFacts {
  std::string type;
  CommKind comm = CommKind::kNone;
  CommCall call = CommCall::kNone;
  bool computes_around_call = false;
  int stream = 0;
  int priority = 0;
  bool last_micro_batch_only = false;
  bool first_micro_batch_only = false;
  OpWork work;
  int signature = 0;
  RingId ring = kMpRing;
  int peer_stage = -1;
  // Vars as interned ids, with whether each lives in the step scope.
  std::vector<std::pair<int, bool>> inputs, outputs;
  // Inputs whose buffer it reads (not only the meta), for memory.
  std::vector<std::pair<int, bool>> buffer_inputs;
  // A view op (OpViewOf): the input whose data its outputs view.
  bool view = false;
  std::pair<int, bool> viewed{-1, false};
  // Outputs written in place into a join's output (PlacedPartOf): (output
  // var, the join's output var).
  std::vector<std::pair<int, int>> placed;
  const google::protobuf::RepeatedPtrField<std::string>* record_events = nullptr;
  const google::protobuf::RepeatedPtrField<std::string>* wait_events = nullptr;
  // A cast of a parameter: its output is a low-precision copy of it.
  bool casts_parameter = false;
  // A sharding-stream reduce-scatter of a temporary: a gradient bucket's
  // (BoundShardedBuckets).
  bool reduces_on_sharding_stream = false;
};

// Gradient buckets a rank may hold unreduced under ZeRO 2 and 3.
constexpr int kShardedBucketsInFlight = 2;

int64_t BytesOf(const proto::VarDesc& v) {
  const TensorMeta m = MetaOf(v);
  return NumElements(m.shape) * SizeOf(m.dtype);
}

// Tracks, per var of a scope, its last writer and the readers since.
struct VarState {
  int writer = -1;
  std::vector<int> readers;
};

class RankLowering {
 public:
  explicit RankLowering(const RankPlan& plan) : plan_(plan) {}

  StatusOr<std::shared_ptr<RankGraphBody>> Run();

 private:
  std::string JobWhere(int ji) const {
    return StrCat("rank ", plan_.rank, ", job ", ji, " (",
                  JobToString(plan_.jobs[ji], plan_.num_chunks > 1), ")");
  }
  // Streams are indexed in name order, so that every rank's body lists them
  // the same way.
  Status CollectStreams();
  const std::vector<OpFacts>& FactsOf(const Program& program);
  void RecordTouches(int micro_batch, const OpFacts& f, Instruction* ins);
  // ZeRO 2 and 3 reduce-scatter every micro-batch's gradient buckets on the
  // sharding stream. Where those calls fall behind the backward, the
  // buckets waiting for them would pile up, and the peak would depend on
  // timing. So a bucket's first write (of a micro-batch) waits for the
  // reduce-scatter kShardedBucketsInFlight calls back: one bucket filling
  // while the one before is reduced, as DeepSpeed's double buffer does, in
  // the executor and the simulator alike. Within a job, the write also
  // holds the bucket that call reduces until it starts (`releases_`):
  // otherwise that bucket is freed whenever its reduce-scatter ends, before
  // or after the next bucket's first write, and the peak moves by a bucket
  // from run to run.
  void BoundShardedBuckets(int job_index, const OpFacts& f, std::vector<int>* deps);
  // What each temporary holds, from who touched it (RecordTouches).
  void ClassifyTemporaries();
  int VarId(const std::string& name, const proto::VarDesc* desc, const Block& block) {
    auto [it, fresh] = var_ids_.emplace(name, static_cast<int>(var_ids_.size()));
    if (fresh) {
      var_names_.push_back(name);
      var_bytes_.push_back(desc == nullptr ? 0 : BytesOf(*desc));
      if (desc != nullptr && desc->persistable()) {
        // A member of a flat buffer (ops name members, never the buffer)
        // is counted as its whole buffer, once, and as what the buffer
        // holds (a ZeRO shard of a parameter bucket holds parameters); the
        // shard of a temporary buffer (ZeRO-3) as itself.
        const proto::VarDesc* buffer =
            desc->has_flat() ? block.FindVar(desc->flat().buffer()) : nullptr;
        const proto::VarDesc* held = buffer != nullptr && buffer->persistable() ? buffer : desc;
        if (held != nullptr && counted_buffers_.insert(held->name()).second) {
          PersistentBytes& p = body_->persistent;
          (held->is_parameter()                              ? p.parameters
           : held->has_cast_of()                             ? weight_copy_bytes_
           : held->name().find("@GRAD") != std::string::npos ? p.gradients
                                                             : p.optimizer_state) +=
              BytesOf(*held);
        }
      }
    }
    return it->second;
  }
  // The temporary of (micro_batch, var), made on first use.
  int TemporaryOf(int micro_batch, int var, int64_t bytes) {
    std::vector<int>& ids = temp_ids_[micro_batch];
    if (static_cast<int>(ids.size()) <= var) ids.resize(var_ids_.size(), -1);
    if (ids[var] < 0) {
      ids[var] = static_cast<int>(body_->temporaries.size());
      body_->temporaries.push_back(Temporary{micro_batch, var, bytes, 0});
    }
    return ids[var];
  }
  VarState& State(int micro_batch, const std::pair<int, bool>& var) {
    std::vector<VarState>& scope = var.second ? step_vars_ : micro_vars_[micro_batch];
    if (static_cast<int>(scope.size()) <= var.first) scope.resize(var_ids_.size());
    return scope[var.first];
  }

  const RankPlan& plan_;
  std::shared_ptr<RankGraphBody> body_ = std::make_shared<RankGraphBody>();
  std::map<std::string, int> stream_index_;
  int sharding_stream_ = -1;  // the stream's index, where a program uses it
  std::unordered_map<const Program*, std::vector<OpFacts>> facts_;
  std::unordered_map<std::string, int> signature_index_;
  std::unordered_map<std::string, int> var_ids_;
  std::set<std::string> counted_buffers_;  // persistables whose bytes are counted
  int64_t weight_copy_bytes_ = 0;          // persistable low-precision weights (VarDesc.cast_of)
  // Per temporary: whether it is a join's output that its parts are
  // written into, and whether one has been (it is allocated once).
  enum JoinBuffer : char { kNotJoined, kUnallocated, kAllocated };
  std::vector<JoinBuffer> join_buffer_;
  std::vector<VarState> step_vars_;
  std::vector<std::vector<VarState>> micro_vars_;
  std::vector<std::vector<int>> temp_ids_;  // micro-batch -> var id -> temp
  std::vector<std::string> var_names_;      // var id -> name
  std::vector<int64_t> var_bytes_;          // var id -> bytes
  // Per temporary, who touched it: TouchBits.
  enum TouchBits : char {
    kForwardTouch = 1,
    kBackwardTouch = 2,
    kCastOfParameter = 4,
    kCommWritten = 8,
  };
  std::vector<char> touched_how_;
  // For BoundShardedBuckets: the vars sharding-stream reduce-scatters read
  // (by var id), the (chunk, micro-batch, var) buckets begun, and the
  // calls that reduce them, in plan order.
  std::unordered_set<int> sharding_reduced_;
  std::set<std::tuple<int, int, int>> buckets_begun_;
  std::vector<int> sharding_calls_;
  std::unordered_set<int> released_calls_;  // whose buckets a later write holds
  std::vector<int> releases_;               // temporaries the instruction being lowered holds
  bool casts_parameters_ = false;
  std::set<int> layers_, recomputed_layers_;
};

Status RankLowering::CollectStreams() {
  std::set<std::string> names = {stream::kCalc};
  std::set<const Program*> seen;
  for (int ji = 0; ji < static_cast<int>(plan_.jobs.size()); ++ji) {
    const Program* program = plan_.ProgramFor(plan_.jobs[ji]);
    if (program == nullptr) return NotFound(JobWhere(ji), ": no program");
    if (!seen.insert(program).second) continue;
    for (Op* op : program->global_block().ops()) {
      if (!op->desc().stream().empty()) names.insert(op->desc().stream());
    }
  }
  for (const std::string& name : names) {
    stream_index_[name] = static_cast<int>(body_->streams.size());
    body_->streams.push_back(StreamQueue{name, {}});
  }
  auto sharding = stream_index_.find(stream::kSharding);
  if (sharding != stream_index_.end()) sharding_stream_ = sharding->second;
  return Status::OK();
}

const std::vector<OpFacts>& RankLowering::FactsOf(const Program& program) {
  auto [it, fresh] = facts_.emplace(&program, std::vector<OpFacts>());
  if (!fresh) return it->second;
  const Block& block = program.global_block();
  auto var = [&](const std::string& name) {
    const proto::VarDesc* v = block.FindVar(name);
    return std::make_pair(VarId(name, v, block), v != nullptr && v->persistable());
  };
  const OpSchema* schema = nullptr;
  for (Op* op : block.ops()) {
    OpFacts f;
    f.type = op->type();
    f.comm = CommKindOf(f.type);
    const std::string& s = op->desc().stream();
    f.stream = stream_index_.at(s.empty() ? std::string(stream::kCalc) : s);
    f.priority = op->desc().has_stream_priority() ? op->desc().stream_priority()
                                                  : stream::DefaultPriority(s);
    f.last_micro_batch_only = op->desc().last_micro_batch_only();
    f.first_micro_batch_only = op->desc().first_micro_batch_only();
    f.work = WorkOf(*op);
    auto [sig, added] = signature_index_.emplace(
        OpSignature(*op), static_cast<int>(body_->signatures.size()));
    if (added) {
      body_->signatures.push_back(sig->first);
      body_->signature_work.push_back(f.work);
    }
    f.signature = sig->second;
    if (f.comm != CommKind::kNone) {
      f.ring = static_cast<RingId>(op->GetAttr<int32_t>("ring_id"));
    }
    if (f.comm == CommKind::kSend || f.comm == CommKind::kRecv) {
      f.peer_stage = op->GetAttr<int32_t>("peer");
    }
    for (const std::string& in : op->InputVars()) f.inputs.push_back(var(in));
    schema = OpRegistry::Global().Find(f.type);
    if (schema != nullptr) {
      f.call = schema->comm_call();
      f.computes_around_call = schema->computes_around_call();
    }
    for (const auto& slot : op->desc().inputs()) {
      if (!ReadsInputData(schema, *op, slot.name())) continue;
      for (const std::string& v : slot.vars()) {
        if (!v.empty()) f.buffer_inputs.push_back(var(v));
      }
    }
    for (const std::string& out : op->OutputVars()) f.outputs.push_back(var(out));
    // (A persistable output is copied into, as the executor does.)
    if (f.comm == CommKind::kNone) {
      if (std::optional<OpView> view = OpViewOf(*op)) {
        f.view = true;
        f.viewed = var(view->input);
      }
    }
    for (const std::string& out : op->OutputVars()) {
      if (std::optional<PlacedPart> at = PlacedPartOf(block, out)) {
        f.placed.emplace_back(var(out).first, var(at->whole).first);
      }
    }
    // A gradient bucket: a temporary a sharding-stream reduce-scatter reads.
    if (f.call == CommCall::kReduceScatter && f.stream == sharding_stream_) {
      for (const auto& [in, persistable] : f.inputs) {
        if (persistable) continue;
        f.reduces_on_sharding_stream = true;
        sharding_reduced_.insert(in);
      }
    }
    f.record_events = &op->desc().record_events();
    f.wait_events = &op->desc().wait_events();
    if (f.type == "cast") {
      const proto::VarDesc* x = block.FindVar(op->Input("X"));
      f.casts_parameter = x != nullptr && x->is_parameter();
      casts_parameters_ |= f.casts_parameter;
    }
    const int32_t layer = op->desc().layer();
    if (layer >= 0 && op->HasRole(role::kForward)) layers_.insert(layer);
    if (layer >= 0 && op->desc().creation_pass() == "recompute") {
      recomputed_layers_.insert(layer);
    }
    it->second.push_back(std::move(f));
  }
  return it->second;
}

void RankLowering::ClassifyTemporaries() {
  RankGraphBody& g = *body_;
  touched_how_.resize(g.temporaries.size(), 0);
  for (size_t t = 0; t < g.temporaries.size(); ++t) {
    Temporary& temp = g.temporaries[t];
    const char how = touched_how_[t];
    const bool gradient = var_names_[temp.var].find("@GRAD") != std::string::npos;
    temp.kind = (how & kCastOfParameter) ? MemoryKind::kParameterCopy
                : (how & kForwardTouch) && (how & kBackwardTouch) ? MemoryKind::kActivation
                : gradient                                        ? MemoryKind::kGradient
                : (how & kCommWritten)                            ? MemoryKind::kCommBuffer
                                                                  : MemoryKind::kWorkspace;
  }
  // The weights a plan computes with are its low-precision copies, where
  // it casts: the fp32 parameters are then the master weights.
  if (casts_parameters_) {
    g.persistent.master_weights = g.persistent.parameters;
    g.persistent.parameters = 0;
  }
  g.persistent.parameters += weight_copy_bytes_;
  g.layers = static_cast<int>(layers_.size());
  g.recomputed_layers = static_cast<int>(recomputed_layers_.size());
}

void RankLowering::RecordTouches(int micro_batch, const OpFacts& f, Instruction* ins) {
  std::vector<int>& touches = body_->touches;
  ins->touches_begin = static_cast<int>(touches.size());
  auto add = [&](const std::pair<int, bool>& var) {
    if (var.second) return;  // persistable
    const int t = TemporaryOf(micro_batch, var.first, var_bytes_[var.first]);
    for (int i = ins->touches_begin; i < static_cast<int>(touches.size()); ++i) {
      if (touches[i] == t) return;
    }
    touches.push_back(t);
    ++body_->temporaries[t].touched_by;
  };
  // A view's output shares the viewed temporary: one buffer, freed after
  // the last toucher of either. A view of persistent memory costs nothing.
  if (f.view) {
    for (const auto& [out, persistable] : f.outputs) {
      if (f.viewed.second) {
        TemporaryOf(micro_batch, out, 0);
        continue;
      }
      const int viewed = TemporaryOf(micro_batch, f.viewed.first, var_bytes_[f.viewed.first]);
      std::vector<int>& ids = temp_ids_[micro_batch];
      if (static_cast<int>(ids.size()) <= out) ids.resize(var_ids_.size(), -1);
      if (ids[out] < 0) {
        ids[out] = viewed;
        body_->temporaries[viewed].views.push_back(out);
      }
    }
  }
  // A part written into a join's output shares that temporary too; the
  // first part written allocates it, and the join allocates nothing.
  for (const auto& [part, whole] : f.placed) {
    const int t = TemporaryOf(micro_batch, whole, var_bytes_[whole]);
    std::vector<int>& ids = temp_ids_[micro_batch];
    if (static_cast<int>(ids.size()) <= part) ids.resize(var_ids_.size(), -1);
    if (ids[part] < 0) {
      ids[part] = t;
      body_->temporaries[t].views.push_back(part);
    }
    if (static_cast<int>(join_buffer_.size()) <= t) join_buffer_.resize(t + 1, kNotJoined);
    if (join_buffer_[t] == kNotJoined) join_buffer_[t] = kUnallocated;
  }
  // Outputs first: those written here for the first time are allocated
  // here, and lead the list (a view allocates nothing).
  for (const auto& out : f.outputs) {
    bool first = !f.view && !out.second && State(micro_batch, out).writer < 0 &&
                 State(micro_batch, out).readers.empty();
    if (!out.second) {
      const int t = TemporaryOf(micro_batch, out.first, var_bytes_[out.first]);
      if (t < static_cast<int>(join_buffer_.size()) && join_buffer_[t] != kNotJoined) {
        first = join_buffer_[t] == kUnallocated;
        join_buffer_[t] = kAllocated;
      }
    }
    const size_t before = touches.size();
    add(out);
    if (first && touches.size() > before) {
      std::swap(touches[ins->touches_begin + ins->allocs], touches.back());
      ++ins->allocs;
    }
  }
  for (const auto& in : f.buffer_inputs) {
    const size_t before = touches.size();
    add(in);
    if (touches.size() > before && State(micro_batch, in).writer < 0) {
      body_->temporaries[touches.back()].fed = true;
    }
  }
  // What it holds until it starts comes last (BoundShardedBuckets).
  const int uses_end = static_cast<int>(touches.size());
  for (int t : releases_) {
    if (std::find(touches.begin() + ins->touches_begin, touches.begin() + uses_end, t) !=
        touches.begin() + uses_end) {
      continue;  // it uses the temporary: held until it ends anyway
    }
    touches.push_back(t);
    ++body_->temporaries[t].touched_by;
    ++ins->releases;
  }
  ins->touches_count = static_cast<int>(touches.size()) - ins->touches_begin;
  // Who touched what, for ClassifyTemporaries.
  const JobType type = plan_.jobs[ins->job_index].type;
  const char phase = type == JobType::kForward     ? kForwardTouch
                     : type == JobType::kOptimizer ? 0
                                                   : kBackwardTouch;
  if (touched_how_.size() < body_->temporaries.size()) {
    touched_how_.resize(body_->temporaries.size(), 0);
  }
  for (int i = ins->touches_begin; i < static_cast<int>(touches.size()); ++i) {
    touched_how_[touches[i]] |= phase;
  }
  if (!f.casts_parameter && f.comm == CommKind::kNone) return;
  for (const auto& [out, persistable] : f.outputs) {
    if (persistable) continue;
    const std::vector<int>& ids = temp_ids_[micro_batch];
    const int t = out < static_cast<int>(ids.size()) ? ids[out] : -1;
    if (t >= 0) touched_how_[t] |= f.casts_parameter ? kCastOfParameter : kCommWritten;
  }
}

void RankLowering::BoundShardedBuckets(int job_index, const OpFacts& f, std::vector<int>* deps) {
  releases_.clear();
  const Job& job = plan_.jobs[job_index];
  auto begin = [&](int var) {
    if (sharding_reduced_.count(var) == 0) return;
    if (!buckets_begun_.insert({job.chunk, job.micro_batch, var}).second) return;
    const int calls = static_cast<int>(sharding_calls_.size());
    if (calls < kShardedBucketsInFlight) return;
    const int call = sharding_calls_[calls - kShardedBucketsInFlight];
    deps->push_back(call);
    // Across jobs the hold would last through whatever runs between them
    // (the next micro-batch's forward under 1F1B): there the bucket goes
    // when its reduce-scatter ends.
    const Instruction& reduce = body_->instructions[call];
    if (reduce.job_index != job_index || !released_calls_.insert(call).second) return;
    for (int i = reduce.touches_begin + reduce.allocs; i < reduce.uses_end(); ++i) {
      releases_.push_back(body_->touches[i]);
    }
  };
  for (const auto& [out, persistable] : f.outputs) {
    if (!persistable) begin(out);
  }
  for (const auto& [part, whole] : f.placed) begin(whole);
}

StatusOr<std::shared_ptr<RankGraphBody>> RankLowering::Run() {
  RankGraphBody& g = *body_;
  g.num_chunks = plan_.num_chunks;
  for (const Job& j : plan_.jobs) g.micro_batches = std::max(g.micro_batches, j.micro_batch + 1);
  micro_vars_.resize(g.micro_batches);
  temp_ids_.resize(g.micro_batches);
  LOOM_RETURN_IF_ERROR(CollectStreams());

  std::unordered_map<std::string, int> recorded;  // "mb/event" -> instruction
  std::array<int, kNumRingIds> last_on_ring;
  std::array<int64_t, kNumRingIds> ring_calls{};
  last_on_ring.fill(-1);
  std::map<std::tuple<int, int, bool>, int64_t> p2p_calls;  // (ring, peer, send?) -> calls
  std::vector<int> deps;
  // One instruction per op of each job's part: deep pipelines lower
  // hundreds of thousands, which growing the vector would copy again.
  size_t instructions = 0;
  for (const Job& job : plan_.jobs) {
    const int size = static_cast<int>(plan_.ProgramFor(job)->global_block().num_ops());
    const int end = job.op_end < 0 ? size : std::min(job.op_end, size);
    instructions += static_cast<size_t>(std::max(0, end - job.op_begin));
  }
  g.instructions.reserve(instructions);

  for (int ji = 0; ji < static_cast<int>(plan_.jobs.size()); ++ji) {
    const Job& job = plan_.jobs[ji];
    const std::vector<OpFacts>& ops = FactsOf(*plan_.ProgramFor(job));
    const bool last_mb = job.micro_batch == g.micro_batches - 1 ||
                         job.type == JobType::kOptimizer;
    const int size = static_cast<int>(ops.size());
    const int end = job.op_end < 0 ? size : job.op_end;
    if (job.op_begin < 0 || job.op_begin > end || end > size) {
      return InvalidArgument(JobWhere(ji), ": ops ", job.op_begin, "-", end,
                             " are outside its program's ", size, " ops");
    }
    for (int k = job.op_begin; k < end; ++k) {
      const OpFacts& f = ops[k];
      Instruction ins;
      ins.id = static_cast<int>(g.instructions.size());
      ins.job_index = ji;
      ins.job = job;
      ins.op_index = k;
      ins.op_type = f.type;
      ins.stream = f.stream;
      ins.stream_priority = f.priority;
      ins.micro_batch = job.micro_batch;
      ins.signature = f.signature;
      switch (f.comm) {
        case CommKind::kNone:
          ins.kind = InstructionKind::kCompute;
          break;
        case CommKind::kCollective:
          ins.kind = InstructionKind::kCollective;
          break;
        case CommKind::kSend:
          ins.kind = InstructionKind::kSend;
          break;
        case CommKind::kRecv:
          ins.kind = InstructionKind::kRecv;
          break;
      }
      // A last_micro_batch_only op outside the last micro-batch (a
      // first_micro_batch_only op outside the first) keeps its place and
      // its dependencies but does nothing.
      if ((f.last_micro_batch_only && !last_mb) ||
          (f.first_micro_batch_only && job.micro_batch != 0)) {
        ins.kind = InstructionKind::kNoOp;
      }

      deps.clear();
      for (const auto& in : f.inputs) {
        const VarState& s = State(job.micro_batch, in);
        if (s.writer >= 0) deps.push_back(s.writer);
      }
      for (const auto& out : f.outputs) {
        const VarState& s = State(job.micro_batch, out);
        if (s.writer >= 0) deps.push_back(s.writer);
        deps.insert(deps.end(), s.readers.begin(), s.readers.end());
      }
      for (const std::string& e : *f.wait_events) {
        auto it = recorded.find(StrCat(job.micro_batch, "/", e));
        if (it == recorded.end()) {
          return FailedPrecondition(JobWhere(ji), ": op ", k, " (", f.type,
                                    ") waits on event '", e,
                                    "', which no earlier op records");
        }
        deps.push_back(it->second);
      }
      BoundShardedBuckets(ji, f, &deps);
      if (ins.communicates()) {
        ins.ring = f.ring;
        ins.call = f.call;
        ins.computes_around_call = f.computes_around_call;
        ins.peer_stage = f.peer_stage;
        ins.comm_bytes = f.work.comm_bytes;
        ins.comm_calls = f.work.comm_calls;
        if (ins.kind == InstructionKind::kCollective) {
          ins.comm_seq = ring_calls[f.ring]++;
          // Every member issues the ring's calls in plan order, whatever
          // stream each call sits on.
          if (last_on_ring[f.ring] >= 0) deps.push_back(last_on_ring[f.ring]);
          last_on_ring[f.ring] = ins.id;
        } else {
          ins.comm_seq =
              p2p_calls[{f.ring, f.peer_stage, ins.kind == InstructionKind::kSend}]++;
        }
      }
      // Keep only cross-stream dependencies, once each.
      std::sort(deps.begin(), deps.end());
      deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
      for (int d : deps) {
        if (g.instructions[d].stream != ins.stream) ins.deps.push_back(d);
      }
      RecordTouches(job.micro_batch, f, &ins);
      for (const auto& in : f.inputs) State(job.micro_batch, in).readers.push_back(ins.id);
      if (f.reduces_on_sharding_stream) sharding_calls_.push_back(ins.id);
      for (const auto& out : f.outputs) {
        VarState& s = State(job.micro_batch, out);
        s.writer = ins.id;
        s.readers.clear();
      }
      for (const std::string& e : *f.record_events) {
        // A first_micro_batch_only op's events, in the micro-batches where
        // it does nothing, stand for the first micro-batch's: what waits
        // on them waits for the work done there, not for this no-op's
        // place in its stream's queue.
        auto first = recorded.end();
        if (f.first_micro_batch_only && job.micro_batch != 0) {
          first = recorded.find(StrCat(0, "/", e));
        }
        recorded[StrCat(job.micro_batch, "/", e)] =
            first != recorded.end() ? first->second : ins.id;
      }
      g.streams[ins.stream].queue.push_back(ins.id);
      g.instructions.push_back(std::move(ins));
    }
  }
  ClassifyTemporaries();
  g.var_names = std::move(var_names_);
  return body_;
}

void ResolveGroups(const ParallelLayout& layout, RankGraph* g) {
  for (RingId ring : kAllRings) g->groups[ring] = RingMembers(layout, g->rank, ring);
  g->stage_ranks.resize(layout.pp);
  for (int s = 0; s < layout.pp; ++s) g->stage_ranks[s] = layout.RankAtStage(g->coords, s);
}

}  // namespace

StatusOr<RankGraph> LowerRank(const RankPlan& plan, const ParallelLayout& layout) {
  RankGraph g;
  g.rank = plan.rank;
  g.coords = plan.coords;
  LOOM_ASSIGN_OR_RETURN(g.body, RankLowering(plan).Run());
  ResolveGroups(layout, &g);
  return g;
}

StatusOr<ExecutionGraph> LowerPlan(const Plan& plan) {
  ExecutionGraph graph;
  graph.layout = plan.layout;
  graph.ranks.reserve(plan.ranks.size());
  // Ranks running the same program set and job list share one body.
  std::unordered_map<const void*, std::vector<int>> lowered;  // key -> ranks
  for (const RankPlan& rp : plan.ranks) {
    RankGraph g;
    g.rank = rp.rank;
    g.coords = rp.coords;
    for (int other : lowered[rp.programs_key()]) {
      if (plan.ranks[other].jobs == rp.jobs) {
        g.body = graph.ranks[other].body;
        break;
      }
    }
    if (g.body == nullptr) {
      LOOM_ASSIGN_OR_RETURN(g.body, RankLowering(rp).Run());
      lowered[rp.programs_key()].push_back(static_cast<int>(graph.ranks.size()));
    }
    ResolveGroups(plan.layout, &g);
    graph.ranks.push_back(std::move(g));
  }
  return graph;
}

}  // namespace loom
