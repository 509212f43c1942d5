// Runs one rank's part of an ExecutionGraph: one thread per named stream,
// each running its instructions in issue order, each instruction starting
// once the instructions it depends on (on other streams) have finished.
//
// Scopes: persistables (parameters, optimizer state, gradient accumulators)
// live in the step scope; every other var lives in the scope of its
// micro-batch, a child of the step scope. A temporary is freed as soon as
// every instruction of the step that touches it has finished, whichever
// stream and job they are in.
//
// Setup apart from execution: Create() binds every instruction to its
// kernel and tensors and starts the stream threads; RunStep() only runs.
#ifndef LOOM_EXECUTOR_RANK_EXECUTOR_H_
#define LOOM_EXECUTOR_RANK_EXECUTOR_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "executor/kernel.h"
#include "executor/scope.h"
#include "executor/stream_sync.h"
#include "scheduler/execution_graph.h"
#include "scheduler/trace.h"

namespace loom {

// Runs a communicating instruction (collective, send, recv; a collective
// may compute too, as the vocabulary-parallel cross entropy does). Returns
// Unimplemented for ops it does not handle.
using CommKernelFn =
    std::function<Status(const Instruction&, const KernelContext&)>;

struct RankExecutorOptions {
  // Vars kept after the step in each micro-batch scope (the loss).
  std::vector<std::string> keep;
  CommKernelFn comm;  // empty: communication ops are an error
  bool trace = false;
  // Stream priorities on CPU threads: a stream whose instructions rank
  // below the rank's highest runs its thread at this nice value (raising
  // nice needs no privilege), so that a woken communication thread takes
  // a core from computation at once instead of at the next tick, and the
  // outranking streams block rather than yield while they wait. 0: all
  // threads alike. Set by the runtime, which knows how many ranks share
  // the host's cores (runtime/parallel_trainer.cc).
  int low_priority_nice = 0;
};

// What RunStep() tells kernels of the step (RunInfo): the training step,
// and where this rank's micro-batches lie in the global batch. Micro-batch
// mb holds rows [first_row + mb * micro_batch_rows, ...) of it, as the
// trainer fed them.
struct StepInfo {
  int64_t step = 0;
  int64_t first_row = 0;
  int64_t micro_batch_rows = 0;
};

class RankExecutor {
 public:
  static StatusOr<std::unique_ptr<RankExecutor>> Create(
      const RankGraph& graph, const RankPlan& plan, Scope* step_scope,
      RankExecutorOptions options);
  ~RankExecutor();

  // Runs every instruction once. Feeds must already be in the micro-batch
  // scopes. The first error (located: rank, job, op) stops all streams.
  Status RunStep(const StepInfo& info = StepInfo());

  Scope* micro_batch_scope(int m) { return micro_scopes_.at(m).get(); }
  int micro_batches() const { return static_cast<int>(micro_scopes_.size()); }
  // Events of the last step, when tracing; times are CLOCK_MONOTONIC
  // nanoseconds, comparable across ranks and processes.
  std::vector<TraceEvent> TakeTrace();
  size_t num_instructions() const { return bound_.size(); }

 private:
  struct Bound {
    const Instruction* ins;
    const Op* op = nullptr;  // in the plan's program
    KernelFn kernel = nullptr;  // nullptr: a communication op or a no-op
    std::vector<BoundSlot> inputs, outputs;
    std::vector<std::pair<Tensor*, TensorMeta>> allocs;
    std::vector<int> touches;  // indices into uses_, released when done
    // A view op (OpViewOf): each of `view_outs` becomes a view of `viewed`
    // from its offset (elements), under its var's meta.
    const Tensor* viewed = nullptr;
    struct ViewOut {
      Tensor* tensor;
      int64_t offset;
      Shape shape;
    };
    std::vector<ViewOut> view_outs;
    // Outputs written in place into a join's output (PlacedPartOf): each
    // becomes a view of `whole` (allocated by the first) before the op
    // runs. A join whose parts all were (OpJoinOf) does nothing.
    struct PlacedOut {
      Tensor* tensor;
      Tensor* whole;
      TensorMeta whole_meta;
      int64_t offset;
      Shape shape;
    };
    std::vector<PlacedOut> placed;
    bool joined = false;
  };
  RankExecutor(const RankGraph& graph, Scope* step_scope,
               RankExecutorOptions options);
  Status Bind(const RankPlan& plan);
  // `nice`: the thread's nice value; `outranks`: the stream ranks above
  // another of the rank (it blocks rather than yields while waiting).
  void StreamLoop(const std::vector<int>* queue, int nice, bool outranks);
  Status RunInstruction(Bound& b);
  void Fail(Status s);

  const RankGraph& graph_;
  Scope* step_scope_;
  RankExecutorOptions options_;
  std::vector<std::unique_ptr<Scope>> micro_scopes_;
  // Per micro-batch, what its kernels see of the step; set by RunStep()
  // before the stream threads are woken (under step_mu_), read by them.
  std::vector<RunInfo> runs_;
  std::vector<Bound> bound_;
  // Per temporary: how many instructions touch it in a step, and the count
  // left in the current step.
  struct Use {
    Tensor* tensor;
    std::vector<Tensor*> views;  // freed with it
    int total;
    std::atomic<int> left;
  };
  std::unique_ptr<Use[]> uses_;
  size_t num_uses_ = 0;

  CompletionFlags done_;
  std::atomic<bool> abort_{false};
  std::mutex status_mu_;
  Status status_;

  // Step control: the step number each stream thread should run, and how
  // many streams finished it.
  std::mutex step_mu_;
  std::condition_variable step_cv_;
  int64_t step_ = 0;
  int finished_ = 0;
  bool shutdown_ = false;
  std::vector<std::thread> threads_;

  std::mutex trace_mu_;
  std::vector<TraceEvent> trace_;
};

}  // namespace loom

#endif  // LOOM_EXECUTOR_RANK_EXECUTOR_H_
