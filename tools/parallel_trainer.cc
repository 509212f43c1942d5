#include "tools/parallel_trainer.h"

#include <atomic>
#include <cstring>
#include <thread>

#include "executor/comm_kernels.h"
#include "executor/serial_executor.h"

namespace loom {

// Executors (and their stream threads) stop before the communicators go.
ParallelTrainer::~ParallelTrainer() { executors_.clear(); }

StatusOr<std::unique_ptr<ParallelTrainer>> ParallelTrainer::Create(
    const GptConfig& config, const OptimizerConfig& optimizer,
    const proto::Strategy& strategy, const Options& options) {
  LOOM_ASSIGN_OR_RETURN(TrainingProgram tp, BuildGptTrainingProgram(config, optimizer));
  std::unique_ptr<ParallelTrainer> t(new ParallelTrainer(config));
  LOOM_ASSIGN_OR_RETURN(t->plan_, PlanRanks(tp.main, tp.startup, strategy, {}));
  LOOM_ASSIGN_OR_RETURN(t->graph_, LowerPlan(t->plan_));
  const int world = static_cast<int>(t->plan_.ranks.size());
  if (world > 1) {
    // Making the groups is collective: every rank at once.
    t->worlds_.resize(world);
    std::vector<Status> status(world);
    std::vector<std::thread> threads;
    // Stores refuse a key twice: each trainer of this process is its own job.
    static std::atomic<int> trainers{0};
    CommWorldOptions comm = options.comm;
    if (comm.store == nullptr && comm.file_store_dir.empty()) {
      comm.job = StrCat(comm.job, "-", trainers++);
    }
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        auto w = CommWorld::Create(t->plan_.layout, r, comm);
        if (w.ok()) {
          t->worlds_[r] = std::move(w).value();
        } else {
          status[r] = w.status();
        }
      });
    }
    for (auto& th : threads) th.join();
    for (const Status& s : status) LOOM_RETURN_IF_ERROR(s);
  }
  for (int r = 0; r < world; ++r) {
    t->scopes_.push_back(std::make_unique<Scope>());
    LOOM_ASSIGN_OR_RETURN(auto startup,
                          SerialExecutor::Create(t->plan_.ranks[r].startup, t->scopes_[r].get()));
    LOOM_RETURN_IF_ERROR(startup->Run().WithContext(StrCat("rank ", r, " startup")));
    RankExecutorOptions exec_options;
    exec_options.keep = {kLossVar};
    exec_options.trace = options.trace;
    if (world > 1) exec_options.comm = MakeCommKernels(t->worlds_[r].get());
    LOOM_ASSIGN_OR_RETURN(
        auto exec, RankExecutor::Create(t->graph_.ranks[r], t->plan_.ranks[r],
                                        t->scopes_[r].get(), std::move(exec_options)));
    t->executors_.push_back(std::move(exec));
  }
  return t;
}

void ParallelTrainer::Feed(int rank, int64_t step) {
  const ParallelLayout& l = plan_.layout;
  RankExecutor& exec = *executors_[rank];
  const int m = exec.micro_batches();
  const int64_t rows = config_.batch_size / (l.dp * m);
  const int64_t s = config_.seq_len;
  const int d = plan_.ranks[rank].coords.dp;
  for (int mb = 0; mb < m; ++mb) {
    const int64_t first = (d * m + mb) * rows;
    for (auto [name, values] : {std::pair{kTokensVar, &tokens_},
                                std::pair{kLabelsVar, &labels_}}) {
      Tensor* t = exec.micro_batch_scope(mb)->Var(name);
      t->Resize(TensorMeta{proto::INT64, {rows, s}});
      std::memcpy(t->raw_data(), values->data() + first * s, t->bytes());
    }
  }
}

StatusOr<float> ParallelTrainer::Step(int64_t step) {
  data_.Batch(step, config_.batch_size, &tokens_, &labels_);
  const int world = static_cast<int>(executors_.size());
  for (int r = 0; r < world; ++r) Feed(r, step);
  std::vector<Status> status(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] { status[r] = executors_[r]->RunStep(); });
  }
  for (auto& t : threads) t.join();
  for (const Status& s : status) LOOM_RETURN_IF_ERROR(s);
  // The global batch's mean loss: every micro-batch of every dp replica is
  // the same size, so it is the mean of their means, read where the loss is
  // computed (the last stage; any mp rank holds the whole value).
  double sum = 0;
  int count = 0;
  for (int r = 0; r < world; ++r) {
    const RankPlan& rp = plan_.ranks[r];
    if (rp.coords.pp != plan_.layout.pp - 1 || rp.coords.mp != 0) continue;
    for (int mb = 0; mb < executors_[r]->micro_batches(); ++mb) {
      Tensor* loss = executors_[r]->micro_batch_scope(mb)->FindLocal(kLossVar);
      if (loss == nullptr || !loss->initialized()) {
        return Internal("rank ", r, " computed no loss for micro-batch ", mb);
      }
      sum += loss->data<float>()[0];
      ++count;
    }
  }
  return static_cast<float>(sum / count);
}

std::vector<TraceEvent> ParallelTrainer::TakeTrace() {
  std::vector<TraceEvent> all;
  for (auto& e : executors_) {
    auto t = e->TakeTrace();
    all.insert(all.end(), t.begin(), t.end());
  }
  return all;
}

}  // namespace loom
