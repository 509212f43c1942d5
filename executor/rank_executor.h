// Runs one rank's part of an ExecutionGraph on one Device: one host thread
// per named stream issues its instructions in order on that stream
// (stream.h), an instruction's dependencies on other streams becoming
// event waits. On CPU issuing runs the work; on CUDA it enqueues it.
//
// Scopes: persistables (parameters, optimizer state, gradient accumulators)
// live in the step scope; every other var lives in the scope of its
// micro-batch, a child of the step scope. A temporary is freed as soon as
// every instruction of the step that touches it has finished, whichever
// stream and job they are in.
//
// Setup apart from execution: Create() binds every instruction to its
// kernel and tensors, makes the streams and events and starts the stream
// threads; RunStep() only runs.
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

#include "executor/device.h"
#include "executor/fp32_shim.h"
#include "executor/kernel.h"
#include "executor/scope.h"
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
  // Time each kernel, for last_compute_seconds(): two clock reads per
  // compute instruction (stream_bench's BM_OneStreamTimingKernels).
  bool time_kernels = false;
  // Where the rank runs; not owned. nullptr: CpuDevice::Default(). Each
  // stream's priority is its instructions' highest, which the device maps
  // onto what it has (a CpuDevice's low_priority_nice, CUDA's priorities).
  Device* device = nullptr;
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
  // Seconds the last step's kernels took, summed over streams, without
  // communication or waits: this rank's own work, which a straggler takes
  // longer over (on CUDA, the time to issue it). 0 without time_kernels.
  double last_compute_seconds() const { return compute_ns_ * 1e-9; }

 private:
  struct Bound {
    const Instruction* ins;
    const Op* op = nullptr;  // in the plan's program
    KernelFn kernel = nullptr;  // nullptr: a communication op or a no-op
    // Set where an fp32-only kernel meets bf16/fp16 tensors.
    std::unique_ptr<Fp32Shim> shim;
    std::vector<BoundSlot> inputs, outputs;
    std::vector<std::pair<Tensor*, TensorMeta>> allocs;
    std::vector<int> touches;  // indices into uses_, released when done
    std::vector<int> releases;  // indices into uses_, released as it starts
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
  // The device's streams (those that run anything) and an event for each
  // instruction another stream waits on.
  Status MakeStreamsAndEvents();
  void StreamLoop(int stream);
  Status RunInstruction(Bound& b, Stream* stream);
  // One of temporary `u`'s touches is done; the last frees it.
  void Untouch(int u);
  void Fail(Status s);

  const RankGraph& graph_;
  Scope* step_scope_;
  RankExecutorOptions options_;
  Device* device_;
  // Per graph stream; nullptr for one that runs nothing.
  std::vector<std::unique_ptr<Stream>> streams_;
  // One event per instruction another stream waits on: event_of_[id] is
  // its index in events_, -1 for the others.
  std::unique_ptr<EventArray> events_;
  std::vector<int> event_of_;
  std::vector<std::unique_ptr<Scope>> micro_scopes_;
  // Per micro-batch, what its kernels see of the step; set by RunStep()
  // before the stream threads are woken (under step_mu_), read by them.
  std::vector<RunInfo> runs_;
  std::vector<int> ring_index_;  // RunInfo::ring_index
  std::vector<Bound> bound_;
  // Per temporary: how many instructions touch it in a step, and the count
  // left in the current step.
  struct Use {
    Tensor* tensor;
    std::vector<Tensor*> views;  // freed with it
    // The streams of the instructions touching it: its memory goes back
    // to the device only after their work (Device::MarkUsedOn).
    std::vector<Stream*> streams;
    int total;
    std::atomic<int> left;
  };
  std::unique_ptr<Use[]> uses_;
  size_t num_uses_ = 0;

  std::atomic<bool> abort_{false};
  std::mutex status_mu_;
  Status status_;

  // Step control: the step number each stream thread should run, and how
  // many streams finished it.
  std::mutex step_mu_;
  std::condition_variable step_cv_;
  int64_t step_ = 0;
  int finished_ = 0;
  // Kernel time of the step so far, added by each stream as it finishes.
  int64_t compute_ns_ = 0;
  bool shutdown_ = false;
  std::vector<std::thread> threads_;

  std::mutex trace_mu_;
  std::vector<TraceEvent> trace_;
};

}  // namespace loom

#endif  // LOOM_EXECUTOR_RANK_EXECUTOR_H_
