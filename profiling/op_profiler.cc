#include "profiling/op_profiler.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <unordered_set>

#include "executor/device_placement.h"
#include "executor/kernel.h"
#include "executor/serial_executor.h"
#include "framework/median.h"
#include "framework/shape_inference.h"

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A communicating op whose kernel computes its own shard and reduces across
// the `nranks` shards (the vocabulary-parallel cross entropy): its compute
// can be timed as a single shard.
bool IsShardedCompute(const Op& op) {
  const OpSchema* schema = OpRegistry::Global().Find(op.type());
  return schema != nullptr && schema->computes_around_call();
}

// The op alone: its vars declared as in its program (inputs fed as data
// unless persistable), its pass annotations (stream, events, stage)
// dropped, since one op runs on no schedule.
StatusOr<Program> OneOpProgram(const Op& op) {
  Program p;
  Block& block = p.global_block();
  const std::vector<std::string> inputs = op.InputVars();
  const std::unordered_set<std::string> read(inputs.begin(), inputs.end());
  std::vector<std::string> vars = inputs;
  for (const std::string& v : op.OutputVars()) vars.push_back(v);
  for (const std::string& name : vars) {
    if (block.HasVar(name)) continue;
    const proto::VarDesc* var = op.block()->FindVar(name);
    if (var == nullptr) return NotFound("var '", name, "' is not declared");
    proto::VarDesc* copy = block.AddVar(name);
    *copy = *var;
    if (read.count(name) && !copy->persistable()) copy->set_is_data(true);
    copy->clear_flat();  // alone, a bucket member is a tensor of its own
  }
  proto::OpDesc desc;
  desc.set_type(op.type());
  *desc.mutable_inputs() = op.desc().inputs();
  *desc.mutable_outputs() = op.desc().outputs();
  *desc.mutable_attrs() = op.desc().attrs();
  desc.set_role(op.desc().role());
  if (IsShardedCompute(op)) {
    // One shard of the vocabulary: the same arithmetic on the same shapes,
    // with its reductions across shards the identity.
    for (proto::Attr& a : *desc.mutable_attrs()) {
      if (a.name() == "nranks") a.set_i(1);
      if (a.name() == "rank") a.set_i(0);
    }
  }
  block.AppendOp(std::move(desc));
  return p;
}

// The meta of `var` in op's block, or an empty shape.
Shape ShapeOf(const Op& op, const std::string& var) {
  const proto::VarDesc* v = var.empty() ? nullptr : op.block()->FindVar(var);
  return v == nullptr ? Shape{} : MetaOf(*v).shape;
}

// Valid integer values for an input slot: [first, first + count).
struct IdRange {
  int64_t first = 0;
  int64_t count = 1;
};

// Ids index the rows of the embedding table (a vocabulary shard starts at
// start_index); labels name one of the classes of the logits (all shards'
// classes for a vocabulary-parallel op). Any other integer input gets 0,
// a valid index into anything non-empty.
IdRange IntRangeOf(const Op& op, const std::string& slot) {
  IdRange r;
  if (slot == "Ids") {
    Shape table = ShapeOf(op, op.Input("W"));
    if (table.empty()) table = ShapeOf(op, op.Output(GradVarName("W")));
    if (!table.empty()) r.count = table[0];
    const proto::Attr* start = FindAttrOrDefault(op.desc(), "start_index");
    if (start != nullptr && start->l() >= 0) r.first = start->l();
  } else if (slot == "Label") {
    Shape logits = ShapeOf(op, op.Input("Logits"));
    if (logits.empty()) logits = ShapeOf(op, op.Input("Softmax"));
    if (!logits.empty()) r.count = logits.back();
    const proto::Attr* nranks = FindAttrOrDefault(op.desc(), "nranks");
    if (nranks != nullptr) r.count *= std::max(1, nranks->i());
  }
  r.count = std::max<int64_t>(1, r.count);
  return r;
}

void Fill(Tensor* t, const IdRange& ids, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> real(0.1, 1.0);
  const int64_t n = t->numel();
  switch (t->dtype()) {
    case proto::FP32: {
      float* p = t->data<float>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(real(rng));
      break;
    }
    case proto::FP64: {
      double* p = t->data<double>();
      for (int64_t i = 0; i < n; ++i) p[i] = real(rng);
      break;
    }
    case proto::INT64: {
      std::uniform_int_distribution<int64_t> id(ids.first, ids.first + ids.count - 1);
      int64_t* p = t->data<int64_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = id(rng);
      break;
    }
    case proto::INT32: {
      std::uniform_int_distribution<int64_t> id(ids.first, ids.first + ids.count - 1);
      int32_t* p = t->data<int32_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(id(rng));
      break;
    }
    case proto::BOOL: {
      auto* p = static_cast<uint8_t*>(t->raw_data());
      for (int64_t i = 0; i < n; ++i) p[i] = rng() & 1;
      break;
    }
    case proto::FP16:
    case proto::BF16: {
      // 0.5 in either format; no CPU kernel computes in them today.
      const uint16_t half = t->dtype() == proto::FP16 ? 0x3800 : 0x3F00;
      auto* p = static_cast<uint16_t*>(t->raw_data());
      std::fill(p, p + n, half);
      break;
    }
    default:
      std::memset(t->raw_data(), 0, t->bytes());
  }
}

StatusOr<OpTiming> TimeOp(const Op& op, const OpProfileOptions& options) {
  LOOM_ASSIGN_OR_RETURN(Program program, OneOpProgram(op));
  const std::string signature = OpSignature(op);
  // Seeded by the signature, so a re-profile feeds the same values.
  std::mt19937_64 rng(options.seed ^ std::hash<std::string>()(signature));
  Scope scope;
  const Block& block = program.global_block();
  // Ranges from the op as it runs (one shard of a sharded op).
  const Op& alone = **block.ops().begin();
  for (const auto& slot : op.desc().inputs()) {
    const IdRange ids = IntRangeOf(alone, slot.name());
    for (const std::string& name : slot.vars()) {
      if (name.empty() || scope.FindLocal(name) != nullptr) continue;
      Tensor* t = scope.Var(name);
      t->Resize(MetaOf(*block.FindVar(name)));
      Fill(t, ids, rng);
    }
  }
  SerialExecutorOptions exec_options;
  std::unique_ptr<Stream> stream;
  if (options.device != nullptr) {
    LOOM_ASSIGN_OR_RETURN(stream, options.device->CreateStream(StreamOptions{"calc"}));
    LOOM_RETURN_IF_ERROR(PlaceScopeOn(&scope, options.device, stream.get()));
    exec_options.device = options.device;
    exec_options.stream = stream.get();
  }
  // A device's work is done once its stream is.
  auto finish = [&] { return stream != nullptr ? stream->Synchronize() : Status::OK(); };
  // Outputs are allocated and freed on every run, as in a real step.
  LOOM_ASSIGN_OR_RETURN(auto exec, SerialExecutor::Create(program, &scope, exec_options));
  for (int i = 0; i < std::max(1, options.warmup_runs); ++i) {
    LOOM_RETURN_IF_ERROR(exec->Run());
  }
  LOOM_RETURN_IF_ERROR(finish());
  // Runs per sample from one more run's time.
  auto start = Clock::now();
  LOOM_RETURN_IF_ERROR(exec->Run());
  LOOM_RETURN_IF_ERROR(finish());
  const double once = std::max(Since(start), 1e-9);
  const int runs = static_cast<int>(std::clamp(
      std::ceil(options.min_sample_seconds / once), 1.0, 100000.0));
  std::vector<double> samples;
  for (int s = 0; s < std::max(1, options.samples); ++s) {
    start = Clock::now();
    for (int r = 0; r < runs; ++r) LOOM_RETURN_IF_ERROR(exec->Run());
    LOOM_RETURN_IF_ERROR(finish());
    samples.push_back(Since(start) / runs);
  }
  OpTiming t;
  t.type = op.type();
  t.signature = signature;
  t.work = WorkOf(op);
  t.median_seconds = Median(samples);
  t.samples = static_cast<int>(samples.size());
  t.runs_per_sample = runs;
  return t;
}

}  // namespace

std::vector<const Op*> DistinctSignatureOps(const std::vector<const Block*>& blocks) {
  std::vector<const Op*> ops;
  std::unordered_set<std::string> seen;
  for (const Block* block : blocks) {
    for (const Op* op : block->ops()) {
      if (seen.insert(OpSignature(*op)).second) ops.push_back(op);
    }
  }
  return ops;
}

std::string UnprofilableReason(const Op& op, const OpProfileOptions& options) {
  RegisterAllCpuKernels();
  const DeviceType type = options.device != nullptr ? options.device->type() : DeviceType::kCpu;
  if (type == DeviceType::kCuda) RegisterAllCudaKernels();
  const bool has_kernel = KernelRegistry::For(type).Find(op.type()) != nullptr;
  if (CommKindOf(op.type()) != CommKind::kNone && !(has_kernel && IsShardedCompute(op))) {
    return "communicates (the communication model prices it)";
  }
  if (!has_kernel) return StrCat("no ", DeviceTypeName(type), " kernel");
  const OpWork work = WorkOf(op);
  if (work.bytes > static_cast<double>(options.max_bytes)) {
    return StrCat("touches ", static_cast<int64_t>(work.bytes),
                  " bytes, over the limit of ", options.max_bytes);
  }
  return "";
}

StatusOr<OpTiming> ProfileOp(const Op& op, const OpProfileOptions& options) {
  RegisterAllCpuKernels();
  openblas_set_num_threads(1);
  auto t = TimeOp(op, options);
  if (!t.ok()) return t.status().WithContext(op.Location());
  return t;
}

StatusOr<BlockProfile> ProfileOps(const std::vector<const Op*>& ops,
                                  const OpProfileOptions& options,
                                  const ProfileProgressFn& progress) {
  BlockProfile out;
  const int total = static_cast<int>(ops.size());
  for (int i = 0; i < total; ++i) {
    const Op& op = *ops[i];
    const std::string signature = OpSignature(op);
    const std::string reason = UnprofilableReason(op, options);
    if (!reason.empty()) {
      out.skipped.push_back({signature, reason});
      continue;
    }
    if (progress) progress(i + 1, total, signature);
    LOOM_ASSIGN_OR_RETURN(OpTiming t, ProfileOp(op, options));
    out.timed.push_back(std::move(t));
  }
  return out;
}

}  // namespace loom
