#include "runtime/program_trainer.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "framework/counter_rng.h"
#include "framework/optimizer.h"
#include "framework/shape_inference.h"
#include "framework/verifier.h"
#include "models/gpt.h"
#include "models/synthetic_data.h"
#include "runtime/training_state.h"

namespace loom {
namespace {

// The bound on an integer data var's values, from the op reading it: an
// embedding's rows, or a cross entropy's classes; 0 if neither reads it.
int64_t IntegerLimit(const Block& block, const std::string& name) {
  for (const Op* op : block.ops()) {
    if (op->type() == "lookup_table" && op->Input("Ids") == name) {
      if (const proto::VarDesc* w = block.FindVar(op->Input("W")); w && w->shape_size() > 0) {
        return w->shape(0);
      }
    }
    if (op->type() == "softmax_with_cross_entropy" && op->Input("Label") == name) {
      if (const proto::VarDesc* l = block.FindVar(op->Input("Logits")); l && l->shape_size() > 0) {
        return l->shape(l->shape_size() - 1);
      }
    }
  }
  return 0;
}

}  // namespace

TokenFeed TokenFeedOf(const Program& program) {
  const Block& block = program.global_block();
  TokenFeed feed;
  const proto::VarDesc* tokens = block.FindVar(kTokensVar);
  if (tokens == nullptr || !tokens->is_data() || tokens->shape_size() != 2) return feed;
  feed.vocab = IntegerLimit(block, kTokensVar);
  if (feed.vocab > 0) feed.seq_len = tokens->shape(1);
  return feed;
}

StatusOr<std::unique_ptr<ProgramTrainer>> ProgramTrainer::Create(Program main, Program startup,
                                                                 const std::string& source,
                                                                 Options options) {
  std::unique_ptr<ProgramTrainer> t(new ProgramTrainer);
  t->source_ = source;
  t->options_ = std::move(options);
  t->main_ = std::move(main);
  t->startup_ = std::move(startup);
  LOOM_RETURN_IF_ERROR(VerifyProgram(t->main_).WithContext(source));
  if (t->startup_.global_block().num_ops() > 0) {
    LOOM_RETURN_IF_ERROR(VerifyProgram(t->startup_).WithContext(StrCat(source, " startup")));
    LOOM_ASSIGN_OR_RETURN(auto startup, SerialExecutor::Create(t->startup_, &t->scope_));
    LOOM_RETURN_IF_ERROR(startup->Run().WithContext(StrCat(source, " startup")));
  }
  const Block& block = t->main_.global_block();
  const TokenFeed tokens = TokenFeedOf(t->main_);
  for (const auto& [name, var] : block.vars()) {
    if (!var.is_data()) continue;
    Feed f;
    f.name = name;
    f.meta = MetaOf(var);
    if (f.meta.dtype == proto::INT64 || f.meta.dtype == proto::INT32) {
      f.limit = std::max<int64_t>(1, IntegerLimit(block, name));
    } else if (!IsFloating(f.meta.dtype)) {
      return InvalidArgument(source, ": data var ", name, " is ", MetaToString(f.meta),
                             "; Loom feeds integer and floating data only");
    }
    // Token ids and their labels, [batch, seq] int64 beside an embedding
    // that reads the tokens, come from the data.
    f.from_dataset = tokens.vocab > 0 && (name == kTokensVar || name == kLabelsVar) &&
                     f.meta.dtype == proto::INT64 && f.meta.shape.size() == 2 &&
                     f.meta.shape[1] == tokens.seq_len;
    t->feeds_.push_back(f);
  }
  t->data_ = t->options_.data;
  if (t->data_ == nullptr) {
    t->data_ = std::make_shared<SyntheticDataset>(std::max<int64_t>(tokens.vocab, 1),
                                                  std::max<int64_t>(tokens.seq_len, 1),
                                                  t->options_.seed);
  }
  SerialExecutorOptions exec;
  exec.fetch = t->options_.fetch;
  if (const proto::VarDesc* loss = block.FindVar(kLossVar)) {
    t->has_loss_ = MetaOf(*loss).dtype == proto::FP32;
    exec.fetch.push_back(kLossVar);
  }
  for (const std::string& name : t->options_.fetch) {
    if (block.FindVar(name) == nullptr) return InvalidArgument(source, " has no var '", name, "' to fetch");
  }
  LOOM_ASSIGN_OR_RETURN(t->executor_, SerialExecutor::Create(t->main_, &t->scope_, exec));
  return t;
}

StatusOr<float> ProgramTrainer::Step(int64_t step) {
  bool batch_drawn = false;
  for (const Feed& f : feeds_) {
    Tensor* t = scope_.Var(f.name);
    t->Resize(f.meta);
    if (f.from_dataset) {
      if (!batch_drawn) data_->Batch(step, f.meta.shape[0], &tokens_, &labels_);
      batch_drawn = true;
      const std::vector<int64_t>& values = f.name == kTokensVar ? tokens_ : labels_;
      std::memcpy(t->raw_data(), values.data(), t->bytes());
      continue;
    }
    const uint64_t key = SplitMix64(SplitMix64(options_.seed) ^ SplitMix64(step)) ^
                         crc32(0, reinterpret_cast<const Bytef*>(f.name.data()), f.name.size());
    const int64_t n = t->numel();
    switch (f.meta.dtype) {
      case proto::INT64:
        for (int64_t i = 0; i < n; ++i) {
          t->data<int64_t>()[i] = static_cast<int64_t>(ToUnit(StreamAt(key, i)) * f.limit);
        }
        break;
      case proto::INT32:
        for (int64_t i = 0; i < n; ++i) {
          t->data<int32_t>()[i] = static_cast<int32_t>(ToUnit(StreamAt(key, i)) * f.limit);
        }
        break;
      case proto::FP32:
        for (int64_t i = 0; i < n; ++i) {
          t->data<float>()[i] = static_cast<float>(2 * ToUnit(StreamAt(key, i)) - 1);
        }
        break;
      case proto::FP64:
        for (int64_t i = 0; i < n; ++i) t->data<double>()[i] = 2 * ToUnit(StreamAt(key, i)) - 1;
        break;
      default:
        return Unimplemented(source_, ": feeding data var ", f.name, " of ",
                             MetaToString(f.meta));
    }
  }
  RunInfo run;
  run.step = step;
  LOOM_RETURN_IF_ERROR(executor_->Run(run).WithContext(StrCat(source_, ": step ", step)));
  if (!has_loss_) return std::numeric_limits<float>::quiet_NaN();
  const float loss = scope_.Find(kLossVar)->data<float>()[0];
  if (!std::isfinite(loss)) {
    return Aborted("step ", step, ": the loss is ", loss,
                   "; training diverged (a learning rate too high?) and stops here");
  }
  return loss;
}

StateHolder ProgramTrainer::Holder() {
  StateHolder h;
  h.startup = &main_;
  h.optimizer_state = OptimizerStateVars(main_.global_block());
  h.scope = &scope_;
  return h;
}

StatusOr<TrainingState> ProgramTrainer::State() { return GatherState({Holder()}); }

Status ProgramTrainer::SetState(const TrainingState& state, const std::string& source) {
  std::set<std::string> used;
  LOOM_RETURN_IF_ERROR(ScatterState(state, Holder(), source, &used));
  return CheckAllUsed(state, used, source);
}

std::map<std::string, std::string> ProgramRecord(const Program& program) {
  // The program itself identifies the model: its ops and vars, as bytes.
  const std::string bytes = program.ToProto().SerializeAsString();
  char crc[9];
  std::snprintf(crc, sizeof(crc), "%08lx",
                crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
  return {{"program_crc32", crc},
          {"program_ops", std::to_string(program.global_block().num_ops())}};
}

std::map<std::string, std::string> ProgramTrainer::ModelRecord() const {
  return ProgramRecord(main_);
}

StatusOr<const Tensor*> ProgramTrainer::FetchVar(const std::string& name) const {
  const Tensor* t = scope_.Find(name);
  if (t == nullptr || !t->initialized()) {
    return NotFound(source_, ": var '", name, "' holds no value after the step (fetch it)");
  }
  return t;
}

}  // namespace loom
