#include "runtime/parallel_trainer.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>
#include <thread>

#include "executor/comm_kernels.h"
#include "executor/cpu/cpu_device.h"
#include "executor/device_placement.h"
#ifdef LOOM_WITH_CUDA
#include "executor/cuda/cuda_device.h"
#include "executor/cuda/cuda_probe.h"
#endif
#include "executor/serial_executor.h"
#include "framework/file_util.h"
#include "framework/grad_clip.h"
#include "framework/optimizer.h"
#include "runtime/finite_loss.h"
#include "runtime/gpt_plan.h"
#include "runtime/host_memory.h"
#include "runtime/training_state.h"
#include "scheduler/simulator.h"
#include "scheduler/plan_verifier.h"
#include "scheduler/schedule.h"

namespace loom {
namespace {

// Plans whose communication is meant to run while calc computes: an
// overlap schedule's interleaved jobs, op-split's parts, or a pipeline's
// transfers, each sent while its stage computes the next job. Without
// priorities such a send, woken while calc computes, waits for calc's
// slice to end, and the next stage idles meanwhile.
bool RunsCommunicationUnderCompute(const Plan& plan) {
  auto schedule = FindSchedule(plan.resolved.schedule_mode());
  return (schedule.ok() && (*schedule)->splits_jobs) || plan.resolved.op_split() ||
         plan.layout.pp > 1;
}

// Runs fn(rank) for every rank on its own thread, on the rank's core where
// `core_of_rank` gives one (>= 0). Each thread is pinned before it first
// runs, and all start together once every one exists: left to the OS, a
// step's thread for rank 1 was sometimes queued behind rank 0's pinned
// calc thread, or created only after this thread had waited out a slice
// beside it, and started a scheduler tick (~4 ms) late. When ranks fail,
// the error returned is the cause: a rank's own failure rather than its
// peers' timeouts or lost connections waiting for it (lowest rank first).
Status ForEachRank(const std::vector<int>& ranks, const std::function<Status(int)>& fn,
                   const std::vector<int>& core_of_rank = {}) {
  std::vector<Status> status(ranks.size());
  std::vector<std::thread> threads;
  std::mutex mu;
  std::condition_variable cv;
  bool go = false;
  for (size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back([&, i] {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return go; });
      }
      status[i] = fn(ranks[i]);
    });
    const int r = ranks[i];
    if (r < static_cast<int>(core_of_rank.size()) && core_of_rank[r] >= 0) {
      PinThread(threads.back().native_handle(), core_of_rank[r]);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    go = true;
  }
  cv.notify_all();
  for (auto& t : threads) t.join();
  auto consequence = [](const Status& s) {
    return s.code() == StatusCode::kDeadlineExceeded ||
           s.code() == StatusCode::kUnavailable;
  };
  for (const Status& s : status) {
    if (!s.ok() && !consequence(s)) return s;
  }
  for (const Status& s : status) LOOM_RETURN_IF_ERROR(s);
  return Status::OK();
}

}  // namespace

// Executors (and their stream threads) stop before the communicators go.
namespace {

// Rank `rank`'s device (see Options::device); `launched`: this process
// runs one rank of a launch.
StatusOr<std::unique_ptr<Device>> MakeRankDevice(DeviceType type, int rank, bool launched,
                                                 const CpuDeviceOptions& cpu) {
  if (type == DeviceType::kCpu) return std::unique_ptr<Device>(new CpuDevice(cpu));
  int ordinal = rank;
#ifdef LOOM_WITH_CUDA
  if (launched) {
    const CudaProbe probe = ProbeCuda();
    if (probe.devices > 0) ordinal = rank % probe.devices;
  }
#endif
  return CreateCudaDevice(ordinal);
}

}  // namespace

ParallelTrainer::~ParallelTrainer() { executors_.clear(); }

StatusOr<std::unique_ptr<ParallelTrainer>> ParallelTrainer::Create(
    const GptConfig& config, const OptimizerConfig& optimizer,
    const proto::Strategy& strategy, const Options& options) {
  PlanOptions plan_options;
  if (options.costs != nullptr) {
    plan_options.costs = options.costs;
  } else {
    LOOM_ASSIGN_OR_RETURN(plan_options.costs, LocalPresetCosts());
  }
  plan_options.cut_by_flops = true;
  LOOM_ASSIGN_OR_RETURN(Plan plan, PlanGpt(config, optimizer, strategy, {}, plan_options));
  const ParallelLayout& l = plan.layout;
  std::string source = StrCat("the plan of ", config.name, " at dp=", l.dp, " mp=", l.mp,
                              " pp=", l.pp, " under ", plan.resolved.schedule_mode());
  return CreateFromPlan(config, std::move(plan), source, options);
}

StatusOr<std::unique_ptr<ParallelTrainer>> ParallelTrainer::CreateFromPlan(
    const GptConfig& config, Plan plan, const std::string& source, const Options& options) {
  LOOM_RETURN_IF_ERROR(CheckPlanIsFor(plan, config).WithContext(source));
  // The whole plan, whichever ranks run here: a rank's partners must be
  // able to pair with it.
  LOOM_RETURN_IF_ERROR(VerifyPlan(plan).WithContext(StrCat(source, ": plan verifier")));
  std::unique_ptr<ParallelTrainer> t(new ParallelTrainer(config, options));
  t->plan_ = std::move(plan);
  const int world = t->plan_.layout.world_size();
  t->local_ = options.local_ranks;
  if (t->local_.empty()) {
    for (int r = 0; r < world; ++r) t->local_.push_back(r);
  }
  for (int r : t->local_) {
    if (r < 0 || r >= world) {
      return InvalidArgument(source, ": rank ", r, " is outside the plan's ", world, " ranks");
    }
  }
  LOOM_ASSIGN_OR_RETURN(t->graph_, LowerPlan(t->plan_));
  {
    // What this process's ranks hold at their peak, with temporaries freed
    // after their last use as the executor frees them (the simulator's
    // accounting, at zero cost).
    LOOM_ASSIGN_OR_RETURN(SimulationResult sim, Simulate(t->graph_));
    int64_t bytes = 0;
    for (int r : t->local_) bytes += sim.ranks.at(r).peak_bytes();
    LOOM_RETURN_IF_ERROR(CheckFitsInHost(
        bytes, StrCat(source, " (", t->local_.size(), " rank(s) in this process)"),
        StrCat(ModelSizeFields(config), ", or spread the ranks over processes (loom launch)")));
  }
  t->priorities_ = options.stream_priorities.value_or(RunsCommunicationUnderCompute(t->plan_)) &&
                   world <= static_cast<int>(std::thread::hardware_concurrency());
  t->worlds_.resize(world);
  t->scopes_.resize(world);
  t->grad_norms_.assign(world, std::numeric_limits<float>::quiet_NaN());
  t->executors_.resize(world);
  // Only while every rank of the host (in this process, or the processes
  // of a launch) can have a core. Oversubscribed, priorities cost more
  // than they give: a step took about twice as long with them (measured:
  // docs/performance.md, "Measurements behind the code"). Nice 5 gives a calc thread about a third of a
  // communication thread's weight.
  CpuDeviceOptions cpu_options;
  if (t->priorities_) cpu_options.low_priority_nice = 5;
  t->devices_.resize(world);
  t->io_streams_.resize(world);
  const std::vector<int> cores = CoresOfThisProcess();
  t->rank_cores_.assign(world, -1);
  for (int r : t->local_) {
    if (options.pin_cores) {
      const int n = static_cast<int>(cores.size());
      cpu_options.core = cores[((r + options.pin_offset) % n + n) % n];
      t->rank_cores_[r] = cpu_options.core;
    }
    StatusOr<std::unique_ptr<Device>> device =
        MakeRankDevice(options.device, r, !options.local_ranks.empty(), cpu_options);
    if (!device.ok()) return device.status().WithContext(StrCat("rank ", r));
    t->devices_[r] = std::move(device).value();
    LOOM_ASSIGN_OR_RETURN(t->io_streams_[r],
                          t->devices_[r]->CreateStream(StreamOptions{"io"}));
  }
  if (world > 1 && !options.local_communication) {
    // Stores refuse a key twice: each in-process trainer is its own job.
    static std::atomic<int> trainers{0};
    CommWorldOptions comm = options.comm;
    if (comm.store == nullptr && comm.file_store_dir.empty()) {
      comm.job = StrCat(comm.job, "-", trainers++);
    }
    // Making the groups is collective: every local rank at once. Each rank's
    // thread is pinned as its streams will be, so that the Gloo device's
    // event-loop thread it starts inherits the rank's core: the PINNED model
    // (and the call-CPU profiler) puts a rank's communication CPU there.
    LOOM_RETURN_IF_ERROR(ForEachRank(t->local_, [&](int r) -> Status {
      CommWorldOptions rank_comm = comm;
#ifdef LOOM_WITH_CUDA
      // Ranks on GPUs talk through NCCL, each on its own device.
      if (options.device == DeviceType::kCuda) {
        rank_comm.backend = CommBackend::kNccl;
        rank_comm.cuda_device = static_cast<CudaDevice*>(t->devices_[r].get())->ordinal();
      }
#endif
      LOOM_ASSIGN_OR_RETURN(t->worlds_[r], CommWorld::Create(t->plan_.layout, r, rank_comm));
      return Status::OK();
    }, t->rank_cores_));
  }
  for (int r : t->local_) {
    t->scopes_[r] = std::make_unique<Scope>();
    LOOM_ASSIGN_OR_RETURN(auto startup,
                          SerialExecutor::Create(t->plan_.ranks[r].startup(), t->scopes_[r].get()));
    LOOM_RETURN_IF_ERROR(startup->Run().WithContext(StrCat("rank ", r, " startup")));
    RankExecutorOptions exec_options;
    exec_options.keep = KeptVars();
    exec_options.trace = options.trace;
    exec_options.time_kernels = options.time_kernels;
    exec_options.device = t->devices_[r].get();
    if (options.local_communication) {
      exec_options.comm = MakeLocalCommKernels();
    } else if (world > 1) {
      exec_options.comm = MakeCommKernels(t->worlds_[r].get());
    }
    LOOM_ASSIGN_OR_RETURN(
        t->executors_[r], RankExecutor::Create(t->graph_.ranks[r], t->plan_.ranks[r],
                                               t->scopes_[r].get(), std::move(exec_options)));
    // After the executor bound the flat buffers, so that their members
    // move as views of one buffer.
    LOOM_RETURN_IF_ERROR(PlaceScopeOn(t->scopes_[r].get(), t->devices_[r].get(),
                                      t->io_streams_[r].get())
                             .WithContext(StrCat("rank ", r, ": placing the state on ",
                                                 t->devices_[r]->name())));
  }
  return t;
}

Status ParallelTrainer::Feed(int rank) {
  const ParallelLayout& l = plan_.layout;
  RankExecutor& exec = *executors_[rank];
  const int m = exec.micro_batches();
  const int64_t rows = config_.batch_size / (l.dp * m);
  const int64_t s = config_.seq_len;
  const int d = plan_.ranks[rank].coords.dp;
  // Micro-batch mb of dp replica d is rows [(d*m + mb) * rows, ...) of the
  // global batch, so the replicas and micro-batches cover it exactly once.
  for (int mb = 0; mb < m; ++mb) {
    const int64_t first = (d * m + mb) * rows;
    for (auto [name, values] : {std::pair{kTokensVar, &tokens_},
                                std::pair{kLabelsVar, &labels_}}) {
      // Staged on the host, then copied to where the rank runs (on the
      // CPU a second copy, of a few KB).
      Tensor host(TensorMeta{proto::INT64, {rows, s}});
      std::memcpy(host.raw_data(), values->data() + first * s, host.bytes());
      if (name == kLabelsVar && rank == options_.poison_labels_on_rank) {
        host.data<int64_t>()[0] = -7;
      }
      LOOM_RETURN_IF_ERROR(CopyToDevice(host, exec.micro_batch_scope(mb)->Var(name),
                                        devices_[rank].get(), io_streams_[rank].get()));
    }
  }
  return io_streams_[rank]->Synchronize();
}

namespace {

// The step's global gradient norm (framework/grad_clip.h), which the
// optimizer job left in one micro-batch's scope; NaN without clipping.
StatusOr<float> GradNormOf(RankExecutor& exec, Device* device, Stream* io) {
  for (int mb = 0; mb < exec.micro_batches(); ++mb) {
    const Tensor* norm = exec.micro_batch_scope(mb)->FindLocal(kGradNormVar);
    if (norm == nullptr || !norm->initialized()) continue;
    LOOM_ASSIGN_OR_RETURN(Tensor host, CopyToHostTensor(*norm, device, io));
    return host.data<float>()[0];
  }
  return std::numeric_limits<float>::quiet_NaN();
}

}  // namespace

StatusOr<float> ParallelTrainer::RunRank(int rank, int64_t step) {
  // Feed()'s rows: replica d's micro-batch mb starts at row (d*m + mb) * rows.
  const int64_t rows = config_.batch_size / (plan_.layout.dp * executors_[rank]->micro_batches());
  LOOM_RETURN_IF_ERROR(executors_[rank]->RunStep(
      {step, plan_.ranks[rank].coords.dp * executors_[rank]->micro_batches() * rows, rows}));
  const RankPlan& rp = plan_.ranks[rank];
  RankExecutor& exec = *executors_[rank];
  Device* device = devices_[rank].get();
  Stream* io = io_streams_[rank].get();
  LOOM_ASSIGN_OR_RETURN(grad_norms_[rank], GradNormOf(exec, device, io));
  if (rp.coords.pp != plan_.layout.LossStage() || rp.coords.mp != 0) {
    return std::numeric_limits<float>::quiet_NaN();
  }
  // Every micro-batch of every replica is the same size, so the batch's
  // mean loss is the mean of their means.
  Tensor mean(TensorMeta{proto::FP32, {1}});
  double sum = 0;
  for (int mb = 0; mb < exec.micro_batches(); ++mb) {
    Tensor* loss = exec.micro_batch_scope(mb)->FindLocal(kLossVar);
    if (loss == nullptr || !loss->initialized()) {
      return Internal("rank ", rank, " computed no loss for micro-batch ", mb);
    }
    LOOM_ASSIGN_OR_RETURN(Tensor host, CopyToHostTensor(*loss, device, io));
    sum += host.data<float>()[0];
  }
  mean.data<float>()[0] = static_cast<float>(sum / exec.micro_batches());
  if (plan_.layout.dp > 1 && !options_.local_communication) {
    LOOM_ASSIGN_OR_RETURN(Communicator* dp, worlds_[rank]->Get(kDpRing));
    // Reduced where the communicators work: on the rank's device.
    Tensor reduced;
    LOOM_RETURN_IF_ERROR(CopyToDevice(mean, &reduced, device, io));
    LOOM_RETURN_IF_ERROR(io->Synchronize());
    LOOM_RETURN_IF_ERROR(dp->AllReduce({&reduced}, ReduceOp::kAvg));
    LOOM_ASSIGN_OR_RETURN(mean, CopyToHostTensor(reduced, device, io));
  }
  // Every replica now holds the same mean, and stops on the same step if it
  // is not finite; one reports it.
  LOOM_RETURN_IF_ERROR(CheckFiniteLoss(mean.data<float>()[0], step));
  if (rp.coords.dp != 0) return std::numeric_limits<float>::quiet_NaN();
  return mean.data<float>()[0];
}

StatusOr<float> ParallelTrainer::Step(int64_t step) {
  data_->Batch(step, config_.batch_size, &tokens_, &labels_);
  for (int r : local_) LOOM_RETURN_IF_ERROR(Feed(r).WithContext(StrCat("rank ", r, " feed")));
  std::vector<float> losses(plan_.ranks.size(), std::numeric_limits<float>::quiet_NaN());
  LOOM_RETURN_IF_ERROR(ForEachRank(
      local_,
      [&](int r) -> Status {
        LOOM_ASSIGN_OR_RETURN(losses[r], RunRank(r, step));
        return Status::OK();
      },
      rank_cores_));
  for (int r : local_) {
    if (!std::isnan(losses[r])) return losses[r];
  }
  return std::numeric_limits<float>::quiet_NaN();
}

std::vector<TraceEvent> ParallelTrainer::TakeTrace() {
  std::vector<TraceEvent> all;
  for (int r : local_) {
    auto t = executors_[r]->TakeTrace();
    all.insert(all.end(), t.begin(), t.end());
  }
  return all;
}

StatusOr<ParallelTrainer::HostView> ParallelTrainer::OnHost(int rank) {
  HostView view;
  if (devices_[rank]->type() == DeviceType::kCpu) {
    view.scope = scopes_[rank].get();
    return view;
  }
  LOOM_ASSIGN_OR_RETURN(view.mirror, MirrorOnHost(*scopes_[rank], devices_[rank].get(),
                                                  io_streams_[rank].get()));
  view.scope = view.mirror.get();
  return view;
}

StateHolder ParallelTrainer::Holder(int rank, Scope* scope) const {
  const RankPlan& rp = plan_.ranks[rank];
  StateHolder h;
  h.startup = &rp.startup();
  // The optimizer's ops, which say which state follows which parameter,
  // are in the job programs.
  for (const auto& [key, program] : rp.programs()) {
    for (auto& [name, axis] : MpShardedVars(program.global_block())) h.sharded[name] = axis;
    for (const std::string& name : OptimizerStateVars(program.global_block())) {
      h.optimizer_state.insert(name);
    }
  }
  h.mp = plan_.layout.mp;
  h.mp_rank = rp.coords.mp;
  h.scope = scope;
  h.buckets = BucketsOf(rank);
  PlaceInShardingGroup(rank, &h.dp, &h.dp_rank);
  h.pp_rank = rp.coords.pp;
  return h;
}

void ParallelTrainer::PlaceInShardingGroup(int rank, int* size, int* index) const {
  const ParallelLayout& l = plan_.layout;
  *size = l.sharding > 0 ? l.sharding : l.dp;
  *index = plan_.ranks[rank].coords.dp % *size;
}

std::string ParallelTrainer::Layout() const {
  const ParallelLayout& l = plan_.layout;
  return StrCat("dp=", l.dp, " mp=", l.mp, " pp=", l.pp, " ", plan_.resolved.schedule_mode());
}

const std::vector<ShardedBucket>& ParallelTrainer::BucketsOf(int rank) const {
  // Once per program set: dp replicas share theirs, and checkpoints ask
  // for every rank's.
  const RankPlan& rp = plan_.ranks[rank];
  auto [it, fresh] = buckets_.try_emplace(rp.programs_key());
  if (fresh) {
    std::vector<const Block*> blocks;
    for (const auto& [key, program] : rp.programs()) blocks.push_back(&program.global_block());
    it->second = ShardedBucketsOf(blocks);
  }
  return it->second;
}

StatusOr<TrainingState> ParallelTrainer::State() {
  if (!HoldsWholeState()) {
    return Unimplemented("gathering the whole state needs every rank in this process; this one "
                         "runs ", local_.size(), " of ", plan_.layout.world_size(),
                         " (under loom launch, checkpoints go through StateForCheckpoint)");
  }
  std::vector<HostView> views;
  std::vector<StateHolder> holders;
  for (int r : local_) {
    LOOM_ASSIGN_OR_RETURN(HostView view, OnHost(r));
    holders.push_back(Holder(r, view.scope));
    views.push_back(std::move(view));
  }
  return GatherState(holders);
}

StatusOr<std::optional<TrainingState>> ParallelTrainer::StateForCheckpoint(int64_t steps_done) {
  const std::string& handover =
      options_.handover_dir.empty() ? options_.comm.file_store_dir : options_.handover_dir;
  if (HoldsWholeState() || handover.empty()) {
    LOOM_ASSIGN_OR_RETURN(TrainingState state, State());
    return std::optional<TrainingState>(std::move(state));
  }
  namespace fs = std::filesystem;
  // The directory is this run's own, so no other run's shards can be
  // found there.
  const fs::path dir = fs::path(handover) / StrCat("checkpoint-", steps_done);
  auto file = [&](int rank) { return (dir / StrCat("rank-", rank, ".safetensors")).string(); };
  // dp replicas hold the same, except for ZeRO buckets, of which each
  // holds its own part.
  auto hands_over = [&](int r) {
    return plan_.ranks[r].coords.dp == 0 || !BucketsOf(r).empty();
  };
  for (int r : local_) {
    if (!hands_over(r)) continue;
    LOOM_ASSIGN_OR_RETURN(HostView view, OnHost(r));
    LOOM_ASSIGN_OR_RETURN(RankShards shards, ShardsOf(Holder(r, view.scope)));
    LOOM_RETURN_IF_ERROR(WriteFileAtomically(file(r), EncodeRankShards(shards)));
  }
  if (std::find(local_.begin(), local_.end(), 0) == local_.end()) {
    return std::optional<TrainingState>();
  }
  std::vector<RankShards> ranks;
  const auto deadline = std::chrono::steady_clock::now() + options_.comm.timeout;
  for (int r = 0; r < plan_.layout.world_size(); ++r) {
    if (!hands_over(r)) continue;
    // Written atomically: once the file is there, it is whole.
    while (!fs::exists(file(r))) {
      if (std::chrono::steady_clock::now() > deadline) {
        const auto seconds =
            std::chrono::duration_cast<std::chrono::seconds>(options_.comm.timeout).count();
        return Status(StatusCode::kDeadlineExceeded,
                      StrCat("checkpoint of step ", steps_done, ": rank ", r,
                             " did not hand over its shards within ", seconds, " s"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    LOOM_ASSIGN_OR_RETURN(std::string bytes, ReadFile(file(r)));
    LOOM_ASSIGN_OR_RETURN(RankShards shards, DecodeRankShards(bytes, file(r)));
    // The buckets' layout is the plan's, which this process has too.
    shards.buckets = BucketsOf(r);
    PlaceInShardingGroup(r, &shards.dp, &shards.dp_rank);
    shards.pp_rank = plan_.ranks[r].coords.pp;
    ranks.push_back(std::move(shards));
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  LOOM_ASSIGN_OR_RETURN(TrainingState state, MergeShards(ranks));
  return std::optional<TrainingState>(std::move(state));
}

Status ParallelTrainer::SetState(const TrainingState& state, const std::string& source) {
  std::set<std::string> used;
  for (int r : local_) {
    LOOM_ASSIGN_OR_RETURN(HostView view, OnHost(r));
    LOOM_RETURN_IF_ERROR(ScatterState(state, Holder(r, view.scope), source, &used)
                             .WithContext(StrCat("rank ", r)));
    LOOM_RETURN_IF_ERROR(RemakeWeightCopies(plan_.ranks[r].startup(), view.scope)
                             .WithContext(StrCat("rank ", r)));
    if (view.mirror != nullptr) {
      LOOM_RETURN_IF_ERROR(CopyMirrorBack(*view.mirror, scopes_[r].get(), devices_[r].get(),
                                          io_streams_[r].get())
                               .WithContext(StrCat("rank ", r)));
    }
  }
  // Only where the whole world is here can a tensor be known unused.
  if (!HoldsWholeState()) return Status::OK();
  return CheckAllUsed(state, used, source);
}

}  // namespace loom
