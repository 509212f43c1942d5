#include "profiling/host_profiler.h"

#include <cblas.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <tuple>

#include "cost_model/comm_model.h"
#include "executor/comm/gloo_communicator.h"
#include "executor/cpu/host_threads.h"
#include "executor/kernel.h"
#include "framework/median.h"
#include "framework/op_builder.h"
#include "framework/shape_inference.h"
#include "profiling/loopback_ranks.h"
#include "profiling/op_profiler.h"

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Spins one SCHED_IDLE thread per core while alive. In a VM an idle vCPU
// halts, and waking it for a message waits for the hypervisor (a host
// tick, docs/performance.md, "Measurements behind the code"): an idle host would measure
// the hypervisor, not the link. SCHED_IDLE threads run only when nothing
// else wants the core, so they keep it awake without slowing the ranks.
class CoreWaker {
 public:
  CoreWaker() {
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned i = 0; i < cores; ++i) {
      threads_.emplace_back([this] {
        sched_param param{};
        pthread_setschedparam(pthread_self(), SCHED_IDLE, &param);
        while (!stop_.load(std::memory_order_relaxed)) {
        }
      });
    }
  }
  ~CoreWaker() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

// C = A B for square fp32 matrices: the compute loop of the interference
// measurement and the peak-rate calibration.
class Sgemm {
 public:
  explicit Sgemm(int64_t dim) : dim_(dim), a_(dim * dim, 0.5f), b_(a_), c_(a_) {}
  void Run() {
    const int d = static_cast<int>(dim_);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d, d, d, 1.0f,
                a_.data(), d, b_.data(), d, 0.0f, c_.data(), d);
  }
  double flops() const { return 2.0 * dim_ * dim_ * dim_; }

 private:
  int64_t dim_;
  std::vector<float> a_, b_, c_;
};

// One thread's per-matmul times until `done` says stop (checked after
// each run).
std::vector<double> MatmulLoop(Sgemm& mm, const std::function<bool()>& done) {
  std::vector<double> times;
  do {
    const auto start = Clock::now();
    mm.Run();
    times.push_back(Since(start));
  } while (!done());
  return times;
}

std::function<bool()> For(double seconds) {
  const auto start = Clock::now();
  return [start, seconds] { return Since(start) >= seconds; };
}

// Every member's step-call times, in group-rank order, on group rank 0
// (empty elsewhere).
StatusOr<std::vector<StepCallTimes>> GatherStepCallTimes(Communicator& comm,
                                                         const StepCallTimes& mine) {
  const int64_t total = static_cast<int64_t>(mine.arrive.size());
  Tensor local(TensorMeta{proto::FP64, {1, 2 * total}});
  std::copy(mine.arrive.begin(), mine.arrive.end(), local.data<double>());
  std::copy(mine.end.begin(), mine.end.end(), local.data<double>() + total);
  Tensor gathered;
  LOOM_RETURN_IF_ERROR(comm.AllGather(local, &gathered));
  std::vector<StepCallTimes> members;
  if (comm.rank() != 0) return members;
  members.resize(comm.size());
  for (int r = 0; r < comm.size(); ++r) {
    const double* row = gathered.data<double>() + r * 2 * total;
    members[r].arrive.assign(row, row + total);
    members[r].end.assign(row + total, row + 2 * total);
  }
  return members;
}

// The calls of ProfileCommMember with compute between them: the mean of
// each from its last party's arrival, on group rank 0.
StatusOr<std::vector<CommTiming>> ProfileBetweenCompute(Communicator& comm,
                                                        const CommProfileOptions& o,
                                                        const std::vector<CommTiming>& cases,
                                                        const HostProgressFn& progress) {
  std::vector<StepCall> calls;
  for (const CommTiming& c : cases) calls.push_back({c.op, c.bytes});
  StepCallOptions so;
  so.min_seconds = o.between_calls_min_seconds;
  so.max_seconds = o.between_calls_max_seconds;
  so.together = o.together;
  so.seed = o.seed;
  so.warmup_rounds = o.warmup_runs;
  so.rounds = o.warmup_runs + std::max(1, o.samples);
  if (progress && comm.rank() == 0) {
    progress(StrCat(so.rounds, " rounds of ", calls.size(), " calls on ", comm.size(),
                    " ranks, each after ", so.min_seconds * 1e3, "-", so.max_seconds * 1e3,
                    " ms of compute", so.together ? " (the same on every rank)" : ""));
  }
  LOOM_ASSIGN_OR_RETURN(StepCallTimes mine, TimeStepCalls(comm, calls, so));
  LOOM_ASSIGN_OR_RETURN(std::vector<StepCallTimes> members, GatherStepCallTimes(comm, mine));
  std::vector<CommTiming> out;
  if (comm.rank() != 0) return out;
  const std::vector<double> means = MeanStepCallSeconds(members, calls, so);
  for (size_t i = 0; i < cases.size(); ++i) {
    out.push_back(cases[i]);
    out.back().median_seconds = means[i];
  }
  return out;
}

}  // namespace

double WireBytesOf(const CommTiming& call) {
  const CommCall kind = CollectiveCallOf(call.op).value();
  return LinkByteFactor(TermsOf(kind, CommAlgorithm::kDirect, call.ranks), false) *
         static_cast<double>(call.bytes);
}

std::vector<CommTiming> CommCases(const CommProfileOptions& o, int ranks) {
  std::vector<CommTiming> cases;
  for (int64_t size : o.sizes) {
    const int64_t numel = std::max<int64_t>(1, size / 4);
    for (const char* op : {"allreduce", "allgather", "send"}) {
      const CommTiming c{op, std::strcmp(op, "send") == 0 ? 2 : ranks, numel * 4, 0};
      if (o.max_wire_bytes > 0 && WireBytesOf(c) > o.max_wire_bytes) continue;
      cases.push_back(c);
    }
  }
  return cases;
}

CommProfileOptions AwakeCallOptions(const CommProfileOptions& step, int64_t send_buffer_bytes) {
  CommProfileOptions o = step;
  o.between_calls_min_seconds = o.between_calls_max_seconds = 0;
  o.samples = CommProfileOptions().samples;
  if (send_buffer_bytes > 0) {
    const int64_t below_buffer = send_buffer_bytes - 1;
    o.max_wire_bytes =
        o.max_wire_bytes > 0 ? std::min(o.max_wire_bytes, below_buffer) : below_buffer;
  }
  return o;
}

bool AwakeCallsStalled(const std::vector<CommTiming>& awake,
                       const std::vector<CommTiming>& together) {
  std::map<std::tuple<std::string, int, int64_t>, double> after_compute;
  for (const CommTiming& c : together) {
    after_compute[{c.op, c.ranks, c.bytes}] = c.median_seconds;
  }
  int compared = 0, slower = 0;
  for (const CommTiming& c : awake) {
    auto it = after_compute.find({c.op, c.ranks, c.bytes});
    if (it == after_compute.end()) continue;
    ++compared;
    if (c.median_seconds > it->second) ++slower;
  }
  return 2 * slower > compared;
}

StatusOr<std::vector<CommTiming>> ProfileCommMember(Communicator& comm,
                                                    const CommProfileOptions& o,
                                                    const HostProgressFn& progress) {
  const int n = comm.size();
  const int r = comm.rank();
  if (n < 2) return InvalidArgument("profiling communication needs 2 ranks or more, got ", n);
  std::vector<CommTiming> cases = CommCases(o, n);
  if (cases.size() < 2) {
    return InvalidArgument("fewer than 2 calls of the sizes asked for put at most ",
                           o.max_wire_bytes, " B on the wire");
  }
  if (o.between_calls_max_seconds > 0) return ProfileBetweenCompute(comm, o, cases, progress);
  // Back to back: every (op, size) once per round, and the median over
  // rounds: a slow spell of the host then spreads over all cases instead
  // of spoiling one.
  std::vector<Tensor> in, out;
  for (const CommTiming& c : cases) {
    const int64_t numel = c.bytes / 4;
    in.push_back(Floats(numel, 1.0f));
    out.push_back(Floats(numel * n, 0.0f));
  }
  // Half a ping-pong between ranks 0 and 1 is one message's one-way time.
  auto call = [&](size_t i) -> Status {
    const std::string& op = cases[i].op;
    if (op == "allreduce") return comm.AllReduce({&in[i]}, ReduceOp::kAvg);
    if (op == "allgather") return comm.AllGather(in[i], &out[i]);
    if (r == 0) {
      LOOM_RETURN_IF_ERROR(comm.Send(in[i], 1));
      return comm.Recv(&in[i], 1);
    }
    if (r == 1) {
      LOOM_RETURN_IF_ERROR(comm.Recv(&in[i], 0));
      return comm.Send(in[i], 0);
    }
    return Status::OK();
  };
  std::vector<std::vector<double>> seconds(cases.size());
  Tensor sync = Floats(1, 0.0f);
  const int rounds = o.warmup_runs + std::max(1, o.samples);
  for (int round = 0; round < rounds; ++round) {
    const bool timed = round >= o.warmup_runs;
    if (progress && r == 0) {
      progress(StrCat(timed ? "round " : "warm-up round ", round + 1, "/", rounds, ": ",
                      cases.size(), " calls on ", n, " ranks"));
    }
    // Untimed: every member starts the round together.
    LOOM_RETURN_IF_ERROR(comm.AllReduce({&sync}, ReduceOp::kSum));
    for (size_t i = 0; i < cases.size(); ++i) {
      const auto start = Clock::now();
      LOOM_RETURN_IF_ERROR(call(i));
      if (timed) seconds[i].push_back(Since(start));
    }
  }
  if (r != 0) return std::vector<CommTiming>();
  for (size_t i = 0; i < cases.size(); ++i) {
    cases[i].median_seconds = Median(seconds[i]);
    if (cases[i].op == "send") cases[i].median_seconds /= 2;
  }
  return cases;
}

StatusOr<std::vector<CommTiming>> ProfileComm(const CommProfileOptions& o,
                                              const HostProgressFn& progress) {
  LOOM_ASSIGN_OR_RETURN(LoopbackGroup group, ConnectLoopback(o.ranks, "profile", o.timeout));
  // Back to back, the cores are kept awake; in the step regime they idle
  // or compute as in a step.
  std::optional<CoreWaker> awake;
  if (o.between_calls_max_seconds <= 0) awake.emplace();
  std::vector<std::vector<CommTiming>> timings(o.ranks);
  LOOM_RETURN_IF_ERROR(RunRanks(o.ranks, [&](int r) -> Status {
    LOOM_ASSIGN_OR_RETURN(timings[r], ProfileCommMember(*group[r], o, progress));
    return Status::OK();
  }));
  return timings[0];
}

StatusOr<std::vector<CommTiming>> ProfileCommOnSharedCores(const CommProfileOptions& o,
                                                           int groups,
                                                           const HostProgressFn& progress) {
  if (o.between_calls_max_seconds <= 0 || groups < 2) {
    return InvalidArgument("calls on shared cores are timed between compute, in 2 groups or more");
  }
  std::vector<int> cores = CoresOfThisProcess();
  if (static_cast<int>(cores.size()) < o.ranks) {
    return FailedPrecondition("calls on shared cores need a core for each of ", o.ranks,
                              " ranks; this process may use ", cores.size());
  }
  cores.resize(o.ranks);
  std::vector<LoopbackGroup> group(groups);
  for (int g = 0; g < groups; ++g) {
    LOOM_ASSIGN_OR_RETURN(group[g],
                          ConnectLoopback(o.ranks, StrCat("profile-shared-", g), o.timeout, cores));
  }
  std::vector<std::vector<CommTiming>> timings(groups);
  LOOM_RETURN_IF_ERROR(RunRanks(groups * o.ranks, [&](int t) -> Status {
    const int g = t / o.ranks, r = t % o.ranks;
    PinThread(pthread_self(), cores[r]);
    // The groups' compute times differ, as two ranks' on a core do.
    CommProfileOptions mine = o;
    mine.seed = o.seed + 1000 * g;
    LOOM_ASSIGN_OR_RETURN(std::vector<CommTiming> member,
                          ProfileCommMember(*group[g][r], mine, g == 0 ? progress : nullptr));
    if (r == 0) timings[g] = std::move(member);
    return Status::OK();
  }));
  std::vector<CommTiming> out = timings[0];
  for (size_t i = 0; i < out.size(); ++i) {
    double sum = 0;
    for (int g = 0; g < groups; ++g) sum += timings[g][i].median_seconds;
    out[i].median_seconds = sum / groups;
  }
  return out;
}

StatusOr<StepCallTimes> TimeStepCalls(Communicator& comm, const std::vector<StepCall>& calls,
                                      const StepCallOptions& o) {
  const int me = comm.rank();
  std::vector<Tensor> in, out;
  for (const StepCall& c : calls) {
    const int64_t numel = std::max<int64_t>(1, c.bytes / 4);
    in.push_back(Floats(numel, 1.0f));
    out.push_back(Floats(numel * comm.size(), 0.0f));
  }
  const int total = o.rounds * static_cast<int>(calls.size());
  StepCallTimes t;
  openblas_set_num_threads(1);
  Sgemm mm(48);
  std::mt19937_64 rng(o.seed + (o.together ? 0 : me));
  std::uniform_real_distribution<double> gap(o.min_seconds, o.max_seconds);
  const auto seconds = [] {
    return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  };
  for (int k = 0; k < total; ++k) {
    const auto until = For(gap(rng));
    do {
      mm.Run();
    } while (!until());
    t.arrive.push_back(seconds());
    const size_t i = k % calls.size();
    const StepCall& c = calls[i];
    if (c.op == "allreduce") {
      LOOM_RETURN_IF_ERROR(comm.AllReduce({&in[i]}, ReduceOp::kAvg));
    } else if (c.op == "allgather") {
      LOOM_RETURN_IF_ERROR(comm.AllGather(in[i], &out[i]));
    } else if (me == 0) {
      LOOM_RETURN_IF_ERROR(comm.Send(in[i], 1));
    } else if (me == 1) {
      LOOM_RETURN_IF_ERROR(comm.Recv(&in[i], 0));
    }
    t.end.push_back(seconds());
  }
  return t;
}

std::vector<double> MeanStepCallSeconds(const std::vector<StepCallTimes>& members,
                                        const std::vector<StepCall>& calls,
                                        const StepCallOptions& o) {
  std::vector<double> means;
  for (size_t i = 0; i < calls.size(); ++i) {
    const int parties =
        calls[i].op == "send" ? 2 : static_cast<int>(members.size());
    double sum = 0;
    int count = 0;
    for (int round = o.warmup_rounds; round < o.rounds; ++round) {
      const size_t k = round * calls.size() + i;
      double arrive = 0, end = 0;
      for (int r = 0; r < parties; ++r) {
        arrive = std::max(arrive, members[r].arrive[k]);
        end = std::max(end, members[r].end[k]);
      }
      sum += end - arrive;
      ++count;
    }
    means.push_back(count > 0 ? sum / count : 0);
  }
  return means;
}

StatusOr<InterferenceResult> MeasureInterferenceMember(Communicator& comm,
                                                       const InterferenceOptions& o) {
  openblas_set_num_threads(1);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = o.compute_threads > 0 ? o.compute_threads : std::max(1, cores / comm.size());
  std::vector<std::unique_ptr<Sgemm>> mms;
  for (int i = 0; i < threads; ++i) {
    mms.push_back(std::make_unique<Sgemm>(o.matmul_dim));
    mms.back()->Run();  // OpenBLAS buffers and page faults, untimed
  }
  // Mean time per matmul over every compute thread. Means, not medians:
  // the allreduce threads take the cores in bursts, so most matmuls run
  // untouched and a few much longer; the simulator needs the lost
  // throughput, and that is the mean.
  auto compute = [&](const std::function<bool()>& done) {
    std::vector<std::vector<double>> per(threads);
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i) {
      pool.emplace_back([&, i] { per[i] = MatmulLoop(*mms[i], done); });
    }
    for (auto& t : pool) t.join();
    double sum = 0;
    size_t count = 0;
    for (const auto& v : per) {
      for (double x : v) sum += x;
      count += v.size();
    }
    return sum / count;
  };
  const int64_t numel = std::max<int64_t>(1, o.allreduce_bytes / 4);
  Tensor buf = Floats(numel, 1.0f);
  Tensor agree = Floats(1, 0.0f);
  // The allreduce's time alone sets how many calls cover a phase; every
  // member takes the slowest member's (the same count, so none waits).
  std::vector<double> probe;
  for (int i = 0; i < 7; ++i) {
    const auto start = Clock::now();
    LOOM_RETURN_IF_ERROR(comm.AllReduce({&buf}, ReduceOp::kAvg));
    if (i > 0) probe.push_back(Since(start));
  }
  InterferenceResult result;
  result.compute_threads = threads;
  agree.data<float>()[0] = static_cast<float>(Median(probe));
  LOOM_RETURN_IF_ERROR(comm.AllReduce({&agree}, ReduceOp::kMax));
  const double probed_seconds = agree.data<float>()[0];

  // Alone and beside the allreduces in turn, several times, and the median
  // of the cycles' ratios: a neighbour's load that comes or goes during the
  // measurement then spoils one cycle, not the result.
  const int cycles = std::max(1, o.cycles);
  const double phase = o.seconds / cycles;
  const int64_t calls = std::max<int64_t>(
      3, static_cast<int64_t>(phase / std::max(probed_seconds, 1e-6)));
  std::vector<double> ratios, alone_means, with_means, comm_alone_means, comm_means, comm_ratios;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    alone_means.push_back(compute(For(phase)));
    // The allreduces alone, in each cycle as the matmuls are: timed once
    // before the cycles, the call's run-to-run spread moved
    // compute_comm_slowdown by half its value (docs/performance.md, "Measurements behind the code").
    LOOM_RETURN_IF_ERROR(comm.AllReduce({&agree}, ReduceOp::kMax));
    {
      const auto start = Clock::now();
      for (int64_t i = 0; i < calls; ++i) {
        LOOM_RETURN_IF_ERROR(comm.AllReduce({&buf}, ReduceOp::kAvg));
      }
      comm_alone_means.push_back(Since(start) / calls);
    }
    // Untimed: every member starts its allreduces together.
    LOOM_RETURN_IF_ERROR(comm.AllReduce({&agree}, ReduceOp::kMax));
    std::atomic<bool> running{true};
    Status status;
    double comm_seconds = 0;
    std::thread loop([&] {
      const auto start = Clock::now();
      for (int64_t i = 0; i < calls && status.ok(); ++i) {
        status = comm.AllReduce({&buf}, ReduceOp::kAvg);
      }
      comm_seconds = Since(start);
      running = false;
    });
    with_means.push_back(compute([&] { return !running.load(); }));
    loop.join();
    LOOM_RETURN_IF_ERROR(status);
    comm_means.push_back(comm_seconds / calls);
    ratios.push_back(with_means.back() / alone_means.back());
    comm_ratios.push_back(comm_means.back() / comm_alone_means.back());
  }
  result.alone_seconds = Median(alone_means);
  result.with_comm_seconds = Median(with_means);
  result.slowdown = Median(ratios);
  result.allreduces = calls * cycles;
  result.allreduce_alone_seconds = Median(comm_alone_means);
  result.allreduce_with_compute_seconds = Median(comm_means);
  result.comm_slowdown = Median(comm_ratios);
  return result;
}

StatusOr<InterferenceResult> MeasureInterference(const InterferenceOptions& o) {
  LOOM_ASSIGN_OR_RETURN(LoopbackGroup group, ConnectLoopback(o.ranks, "interference", o.timeout));
  // One process holds every member; each takes its share of the host's
  // cores for compute threads (MeasureInterferenceMember's default).
  std::vector<InterferenceResult> results(o.ranks);
  LOOM_RETURN_IF_ERROR(RunRanks(o.ranks, [&](int r) -> Status {
    LOOM_ASSIGN_OR_RETURN(results[r], MeasureInterferenceMember(*group[r], o));
    return Status::OK();
  }));
  // Rank 0's, with the compute threads of all members counted.
  results[0].compute_threads *= o.ranks;
  return results[0];
}

StatusOr<double> TimeLongAllReduceMember(Communicator& comm, int64_t bytes, int calls) {
  Tensor buf = Floats(std::max<int64_t>(1, bytes / 4), 1.0f);
  Tensor agree = Floats(1, 0.0f);
  LOOM_RETURN_IF_ERROR(comm.AllReduce({&buf}, ReduceOp::kAvg));  // buffers, connections
  LOOM_RETURN_IF_ERROR(comm.AllReduce({&agree}, ReduceOp::kMax));
  const auto start = Clock::now();
  for (int i = 0; i < std::max(1, calls); ++i) {
    LOOM_RETURN_IF_ERROR(comm.AllReduce({&buf}, ReduceOp::kAvg));
  }
  return Since(start) / std::max(1, calls);
}

StatusOr<double> TimeLongAllReduce(int ranks, int64_t bytes, int calls,
                                   std::chrono::milliseconds timeout) {
  LOOM_ASSIGN_OR_RETURN(LoopbackGroup group, ConnectLoopback(ranks, "long-transfer", timeout));
  std::vector<double> seconds(ranks);
  LOOM_RETURN_IF_ERROR(RunRanks(ranks, [&](int r) -> Status {
    LOOM_ASSIGN_OR_RETURN(seconds[r], TimeLongAllReduceMember(*group[r], bytes, calls));
    return Status::OK();
  }));
  return seconds[0];
}

StatusOr<DeviceCalibration> CalibrateDevice(double seconds) {
  DeviceCalibration c;
  c.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  c.memory_bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) *
                   static_cast<int64_t>(sysconf(_SC_PAGESIZE));

  openblas_set_num_threads(1);
  Sgemm mm(1024);
  mm.Run();
  for (int i = 0; i < 5; ++i) {
    const auto start = Clock::now();
    mm.Run();
    c.core_fp32_flops = std::max(c.core_fp32_flops, mm.flops() / Since(start));
  }
  // Spaced out rather than back to back: the host's speed moves over
  // seconds (neighbours on a shared machine), not within one call.
  const auto sampling = Clock::now();
  while (Since(sampling) < seconds) {
    const auto start = Clock::now();
    mm.Run();
    c.core_fp32_flops_over_time.push_back(mm.flops() / Since(start));
    std::this_thread::sleep_until(start + std::chrono::milliseconds(250));
  }

  const size_t bytes = size_t{256} << 20;
  std::unique_ptr<char[]> src(new char[bytes]), dst(new char[bytes]);
  std::memset(src.get(), 1, bytes);
  std::memset(dst.get(), 0, bytes);  // fault the pages in before timing
  for (int i = 0; i < 5; ++i) {
    const auto start = Clock::now();
    std::memcpy(dst.get(), src.get(), bytes);
    // Nothing reads dst, so a compiler may drop the copy (clang did under
    // TSan, and the host's memory then "copied" 8e6 GB/s): the barrier
    // makes it happen.
    asm volatile("" : : "r"(dst.get()) : "memory");
    c.core_memory_bandwidth =
        std::max(c.core_memory_bandwidth, 2.0 * bytes / Since(start));
  }

  // The smallest op there is: its time is the executor's per-op overhead.
  RegisterAllCpuKernels();
  Program p;
  proto::VarDesc* x = p.global_block().AddVar("x");
  SetMeta(TensorMeta{proto::FP32, {1}}, x);
  x->set_is_data(true);
  LOOM_ASSIGN_OR_RETURN(Op* op, AppendOpInferShapes(
                                    p.global_block(),
                                    OpDescBuilder("scale").Input("X", "x").Output("Out", "y")));
  OpProfileOptions options;
  options.samples = 9;
  LOOM_ASSIGN_OR_RETURN(OpTiming t, ProfileOp(*op, options));
  c.dispatch_seconds = t.median_seconds;
  return c;
}

}  // namespace loom
