#include "executor/rank_executor.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <set>

#include "executor/cpu/cpu_device.h"
#include "executor/flat_buffers.h"
#include "framework/op_view.h"
#include "framework/shape_inference.h"

namespace loom {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

RankExecutor::RankExecutor(const RankGraph& graph, Scope* step_scope,
                           RankExecutorOptions options)
    : graph_(graph),
      step_scope_(step_scope),
      options_(std::move(options)),
      device_(options_.device != nullptr ? options_.device : CpuDevice::Default()) {}

StatusOr<std::unique_ptr<RankExecutor>> RankExecutor::Create(
    const RankGraph& graph, const RankPlan& plan, Scope* step_scope,
    RankExecutorOptions options) {
  RegisterAllCpuKernels();
  if (options.device != nullptr && options.device->type() == DeviceType::kCuda) {
    RegisterAllCudaKernels();
  }
  // Streams run side by side: each keeps OpenBLAS to one thread so that
  // they do not oversubscribe the cores.
  openblas_set_num_threads(1);
  std::unique_ptr<RankExecutor> exec(
      new RankExecutor(graph, step_scope, std::move(options)));
  for (int m = 0; m < graph.micro_batches(); ++m) {
    exec->micro_scopes_.push_back(std::make_unique<Scope>(step_scope));
  }
  exec->runs_.resize(exec->micro_scopes_.size());
  LOOM_RETURN_IF_ERROR(exec->Bind(plan));
  LOOM_RETURN_IF_ERROR(exec->MakeStreamsAndEvents());
  for (size_t i = 0; i < exec->streams_.size(); ++i) {
    if (exec->streams_[i] != nullptr) {
      exec->threads_.emplace_back(&RankExecutor::StreamLoop, exec.get(), static_cast<int>(i));
    }
  }
  return exec;
}

RankExecutor::~RankExecutor() {
  {
    std::lock_guard<std::mutex> lock(step_mu_);
    shutdown_ = true;
  }
  abort_ = true;
  step_cv_.notify_all();
  if (events_ != nullptr) events_->WakeAll();
  for (auto& t : threads_) t.join();
}

Status RankExecutor::MakeStreamsAndEvents() {
  const auto& streams = graph_.streams();
  // A stream's priority is its instructions' highest; over the streams
  // that run anything, the highest and the lowest.
  std::vector<int> priority(streams.size(), std::numeric_limits<int>::min());
  int top = std::numeric_limits<int>::min(), bottom = std::numeric_limits<int>::max();
  for (size_t i = 0; i < streams.size(); ++i) {
    if (streams[i].queue.empty()) continue;
    for (int id : streams[i].queue) {
      priority[i] = std::max(priority[i], graph_.instructions()[id].stream_priority);
    }
    top = std::max(top, priority[i]);
    bottom = std::min(bottom, priority[i]);
  }
  streams_.resize(streams.size());
  for (size_t i = 0; i < streams.size(); ++i) {
    if (streams[i].queue.empty()) continue;
    StreamOptions options{streams[i].name, priority[i], top, bottom};
    StatusOr<std::unique_ptr<Stream>> stream = device_->CreateStream(options);
    if (!stream.ok()) {
      return stream.status().WithContext(StrCat("rank ", graph_.rank, " stream ", streams[i].name));
    }
    streams_[i] = std::move(stream).value();
  }
  event_of_.assign(graph_.instructions().size(), -1);
  int events = 0;
  for (const Instruction& ins : graph_.instructions()) {
    for (int d : ins.deps) {
      if (event_of_[d] < 0) event_of_[d] = events++;
    }
  }
  LOOM_ASSIGN_OR_RETURN(events_, device_->CreateEvents(events));
  // Which streams touch each temporary: its memory goes back to the device
  // only after their work.
  for (const Instruction& ins : graph_.instructions()) {
    Stream* stream = streams_[ins.stream].get();
    for (int i = 0; i < ins.touches_count; ++i) {
      std::vector<Stream*>& on = uses_[graph_.body->touches[ins.touches_begin + i]].streams;
      if (std::find(on.begin(), on.end(), stream) == on.end()) on.push_back(stream);
    }
  }
  return Status::OK();
}

Status RankExecutor::Bind(const RankPlan& plan) {
  const RankGraphBody& body = *graph_.body;
  std::set<std::string> keep(options_.keep.begin(), options_.keep.end());
  std::map<const Program*, std::vector<Op*>> program_ops;
  const auto ring_index = [&](int ring) {
    if (ring < 0 || ring >= kNumRingIds) return -1;
    const std::vector<int>& group = graph_.groups[ring];
    auto it = std::find(group.begin(), group.end(), graph_.rank);
    return it == group.end() ? -1 : static_cast<int>(it - group.begin());
  };
  ring_index_.clear();
  for (int ring = 0; ring < kNumRingIds; ++ring) ring_index_.push_back(ring_index(ring));
  bound_.reserve(graph_.instructions().size());
  for (const Instruction& ins : graph_.instructions()) {
    const Program* program = plan.ProgramFor(ins.job);
    if (program == nullptr) {
      return NotFound(InstructionLocation(graph_, ins), ": the plan has no program for the job");
    }
    auto [ops, fresh] = program_ops.emplace(program, std::vector<Op*>());
    if (fresh) {
      ops->second = program->global_block().OpVector();
      LOOM_RETURN_IF_ERROR(BindFlatBuffers(program->global_block(), step_scope_, ring_index)
                               .WithContext(InstructionLocation(graph_, ins)));
    }
    if (ins.op_index >= static_cast<int>(ops->second.size()) ||
        ops->second[ins.op_index]->type() != ins.op_type) {
      return FailedPrecondition(InstructionLocation(graph_, ins),
                                ": the plan's program does not match the graph it was lowered to");
    }
    const Op* op = ops->second[ins.op_index];
    const Block& block = *op->block();
    Scope* micro = micro_scopes_.at(ins.micro_batch).get();
    auto tensor_of = [&](const std::string& name) -> Tensor* {
      const proto::VarDesc* v = block.FindVar(name);
      if (v != nullptr && v->persistable()) {
        Tensor* t = step_scope_->FindLocal(name);
        return t != nullptr ? t : step_scope_->Var(name);
      }
      return micro->Var(name);
    };
    auto bind = [&](const google::protobuf::RepeatedPtrField<proto::OpDesc::Slot>& slots) {
      std::vector<BoundSlot> out;
      for (const auto& slot : slots) {
        BoundSlot b{slot.name(), {}};
        for (const auto& v : slot.vars()) b.tensors.push_back(v.empty() ? nullptr : tensor_of(v));
        out.push_back(std::move(b));
      }
      return out;
    };
    Bound b;
    b.ins = &ins;
    b.op = op;
    const OpSchema* schema = OpRegistry::Global().Find(ins.op_type);
    if (schema == nullptr) {
      return NotFound(InstructionLocation(graph_, ins), ": unknown op type");
    }
    // The schema says who runs an op: a kernel, or the communicators.
    if (ins.kind == InstructionKind::kCompute) {
      b.kernel = KernelRegistry::For(device_->type()).Find(ins.op_type);
      if (b.kernel == nullptr) {
        return Unimplemented(InstructionLocation(graph_, ins), ": no ",
                             DeviceTypeName(device_->type()), " kernel");
      }
    }
    b.inputs = bind(op->desc().inputs());
    b.outputs = bind(op->desc().outputs());
    if (b.kernel != nullptr) {
      auto shim = Fp32Shim::For(device_->type(), *op, b.inputs, b.outputs);
      if (!shim.ok()) return shim.status().WithContext(InstructionLocation(graph_, ins));
      b.shim = std::move(*shim);
    }
    // A view op whose output is persistable (it outlives the step, and
    // others may accumulate into it) copies instead (OpViewOf).
    std::optional<OpView> view =
        ins.kind == InstructionKind::kCompute ? OpViewOf(*op) : std::nullopt;
    if (view) {
      b.viewed = tensor_of(view->input);
      const std::vector<std::string> outs = op->OutputVars();
      for (size_t i = 0; i < outs.size(); ++i) {
        b.view_outs.push_back({tensor_of(outs[i]), view->offsets[i],
                               MetaOf(*block.FindVar(outs[i])).shape});
      }
    } else if (ins.kind == InstructionKind::kCompute && OpJoinOf(*op)) {
      b.joined = true;
    } else {
      for (const std::string& out : op->OutputVars()) {
        const TensorMeta meta = MetaOf(*block.FindVar(out));
        if (std::optional<PlacedPart> at = PlacedPartOf(block, out)) {
          b.placed.push_back({tensor_of(out), tensor_of(at->whole),
                              MetaOf(*block.FindVar(at->whole)), at->offset, meta.shape});
        } else {
          b.allocs.emplace_back(tensor_of(out), meta);
        }
      }
    }
    // Temporaries, as lowering counted them: freed after their last toucher.
    for (int i = ins.touches_begin; i < ins.touches_begin + ins.touches_count; ++i) {
      const int t = body.touches[i];
      if (NamesTemporary(body, body.temporaries[t], keep)) continue;
      (i < ins.uses_end() ? b.touches : b.releases).push_back(t);
    }
    bound_.push_back(std::move(b));
  }
  num_uses_ = body.temporaries.size();
  uses_.reset(new Use[num_uses_]);
  for (size_t i = 0; i < num_uses_; ++i) {
    const Temporary& t = body.temporaries[i];
    uses_[i].tensor = micro_scopes_.at(t.micro_batch)->Var(body.var_names[t.var]);
    for (int v : t.views) {
      uses_[i].views.push_back(micro_scopes_.at(t.micro_batch)->Var(body.var_names[v]));
    }
    uses_[i].total = t.touched_by;
    uses_[i].left.store(t.touched_by);
  }
  return Status::OK();
}

void RankExecutor::Fail(Status s) {
  {
    std::lock_guard<std::mutex> lock(status_mu_);
    if (status_.ok()) status_ = std::move(s);
  }
  abort_ = true;
  if (events_ != nullptr) events_->WakeAll();
}

Status RankExecutor::RunInstruction(Bound& b, Stream* stream) {
  const Instruction& ins = *b.ins;
  if (ins.kind == InstructionKind::kNoOp) return Status::OK();
  if (b.viewed != nullptr) {
    if (!b.viewed->initialized()) {
      return FailedPrecondition("views '", b.op->InputVars().front(), "', which holds no data");
    }
    for (const Bound::ViewOut& v : b.view_outs) *v.tensor = b.viewed->View(v.offset, v.shape);
    return Status::OK();
  }
  if (b.joined) return Status::OK();
  for (Bound::PlacedOut& p : b.placed) {
    // Parts of one join are written on one stream (OpJoinOf), in order.
    if (!p.whole->initialized()) {
      LOOM_RETURN_IF_ERROR(p.whole->Resize(p.whole_meta, device_, stream));
    }
    *p.tensor = p.whole->View(p.offset, p.shape);
  }
  for (auto& [tensor, meta] : b.allocs) {
    LOOM_RETURN_IF_ERROR(tensor->Resize(meta, device_, stream));
  }
  KernelContext ctx(b.op->desc(), b.inputs, b.outputs, runs_.at(ins.micro_batch), device_,
                    stream);
  if (b.shim != nullptr) {
    return b.shim->Run(b.kernel, b.op->desc(), runs_.at(ins.micro_batch), device_, stream);
  }
  if (b.kernel != nullptr) return b.kernel(ctx);
  if (!options_.comm) {
    return Unimplemented("communication op without a communicator");
  }
  return options_.comm(ins, ctx);
}

void RankExecutor::Untouch(int u) {
  Use& use = uses_[u];
  if (use.left.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  for (Stream* on : use.streams) device_->MarkUsedOn(use.tensor->storage(), on);
  use.tensor->Free();
  for (Tensor* v : use.views) v->Free();
}

void RankExecutor::StreamLoop(int stream_index) {
  Stream* stream = streams_[stream_index].get();
  const std::vector<int>& queue = graph_.streams()[stream_index].queue;
  stream->OnIssuingThread();
  int64_t seen = 0;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(step_mu_);
      step_cv_.wait(lock, [&] { return shutdown_ || step_ > seen; });
      if (shutdown_) return;
      seen = step_;
    }
    int64_t compute_ns = 0;
    for (int id : queue) {
      Bound& b = bound_[id];
      Status s;
      bool go = !abort_.load();
      for (auto d = b.ins->deps.begin(); go && d != b.ins->deps.end(); ++d) {
        StatusOr<bool> waited = stream->Wait(*events_, event_of_[*d], seen, abort_);
        if (!waited.ok()) s = waited.status();
        go = waited.ok() && *waited;
      }
      // On CUDA these are the times the host issued the work, not ran it.
      const bool compute = options_.time_kernels && b.ins->kind == InstructionKind::kCompute;
      const int64_t start = go && (options_.trace || compute) ? NowNs() : 0;
      if (go) {
        for (int u : b.releases) Untouch(u);
        s = RunInstruction(b, stream);
      }
      // Stamped before the event is recorded: recording wakes the threads
      // waiting on it, and one of them may take this thread's core for a
      // slice before it stamps, which would stretch a recv's span by up to
      // a scheduler tick after its data arrived.
      const int64_t end = go && (options_.trace || compute) ? NowNs() : 0;
      if (go && compute) compute_ns += end - start;
      for (int u : b.touches) {
        if (!go || !s.ok()) break;
        Untouch(u);
      }
      if (go && s.ok() && event_of_[id] >= 0) {
        s = stream->Record(*events_, event_of_[id], seen);
      }
      if (!s.ok()) Fail(s.WithContext(InstructionLocation(graph_, *b.ins)));
      if (!go || !s.ok()) break;
      if (options_.trace) {
        // The host's monotonic clock, shared by every rank's executor (and
        // process) on it, so that ranks line up in one trace.
        TraceEvent e = TraceEventOf(graph_, *b.ins, start, end);
        std::lock_guard<std::mutex> lock(trace_mu_);
        trace_.push_back(std::move(e));
      }
    }
    {
      std::lock_guard<std::mutex> lock(step_mu_);
      compute_ns_ += compute_ns;
      ++finished_;
    }
    step_cv_.notify_all();
  }
}

Status RankExecutor::RunStep(const StepInfo& info) {
  for (size_t i = 0; i < num_uses_; ++i) uses_[i].left.store(uses_[i].total);
  std::unique_lock<std::mutex> lock(step_mu_);
  for (size_t mb = 0; mb < runs_.size(); ++mb) {
    runs_[mb] = RunInfo{info.step,
                        info.first_row + static_cast<int64_t>(mb) * info.micro_batch_rows,
                        &ring_index_};
  }
  finished_ = 0;
  compute_ns_ = 0;
  ++step_;
  step_cv_.notify_all();
  const int streams = static_cast<int>(threads_.size());
  step_cv_.wait(lock, [&] { return finished_ == streams; });
  lock.unlock();
  // Everything is issued; wait for the device to finish it (a CPU stream
  // already has).
  for (const auto& stream : streams_) {
    if (stream == nullptr) continue;
    Status s = stream->Synchronize();
    if (!s.ok()) Fail(s.WithContext(StrCat("rank ", graph_.rank, " stream ",
                                           stream->options().name)));
  }
  std::lock_guard<std::mutex> status_lock(status_mu_);
  return status_;
}

std::vector<TraceEvent> RankExecutor::TakeTrace() {
  std::lock_guard<std::mutex> lock(trace_mu_);
  return std::move(trace_);
}

}  // namespace loom
