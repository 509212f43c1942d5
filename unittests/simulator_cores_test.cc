// The simulator on a CPU host whose ranks share cores: each pool's cores
// go to its compute, communication and compute slow each other, and a
// call learns how long compute goes on on its parties' cores.
#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include <gtest/gtest.h>

#include "scheduler/simulator.h"
#include "unittests/simulator_test_util.h"

namespace loom {
namespace {

// FixedTimer on a host of `cores` shared by every rank.
class SharedHostTimer : public FixedSharedCoreTimer {
 public:
  SharedHostTimer(double compute, double comm, double cores, double slowdown)
      : FixedSharedCoreTimer(compute, comm), cores_(cores), slowdown_(slowdown) {}
  int CorePool(const RankGraph&) const override { return 0; }
  double PoolCores(int) const override { return cores_; }
  double CommSlowdown(int) const override { return slowdown_; }

 private:
  double cores_, slowdown_;
};

// Two data-parallel ranks computing the same work: on two cores of their
// own they take the time of one; on one shared core, twice that; with
// enough cores, sharing changes nothing.
TEST(Simulator, RanksSharingCoresComputeAtTheirShare) {
  ExecutionGraph graph = Lower(MakeStrategy(2, 1, 1, 1, "1F1B"), 2, 8);
  auto run = [&](const InstructionTimer& timer) {
    SimulationOptions o;
    o.timer = &timer;
    return Simulate(graph, o).value();
  };
  const double alone = run(FixedTimer(1e-3, 0)).step_time_s;
  EXPECT_NEAR(run(SharedHostTimer(1e-3, 0, 1, 1)).step_time_s, 2 * alone, 1e-9);
  EXPECT_NEAR(run(SharedHostTimer(1e-3, 0, 2, 1)).step_time_s, alone, 1e-9);
  EXPECT_NEAR(run(SharedHostTimer(1e-3, 0, 8, 1)).step_time_s, alone, 1e-9);
  // Communication that slows compute 1.5x while it runs: with free
  // communication nothing changes.
  EXPECT_NEAR(run(SharedHostTimer(1e-3, 0, 2, 1.5)).step_time_s, alone, 1e-9);
  // With costly communication the step grows by the slowed compute that
  // overlaps it, never by less than the communication itself.
  const double comm = run(FixedTimer(1e-3, 5e-4)).step_time_s;
  const double slowed = run(SharedHostTimer(1e-3, 5e-4, 2, 1.5)).step_time_s;
  EXPECT_GE(slowed, comm - 1e-12);
}

// Ranks time-sliced on a shared core (SharedCoreSlowdown) compute that
// much slower while both compute there; where each rank has its cores the
// factor never applies.
TEST(Simulator, RanksTimeSlicedOnACoreTakeTheSharedCoresSlowdown) {
  class Timer : public SharedHostTimer {
   public:
    Timer(double cores, double shared)
        : SharedHostTimer(1e-3, 0, cores, 1), shared_(shared) {}
    double SharedCoreSlowdown(int) const override { return shared_; }

   private:
    double shared_;
  };
  ExecutionGraph graph = Lower(MakeStrategy(2, 1, 1, 1, "1F1B"), 2, 8);
  auto run = [&](const InstructionTimer& timer) { return StepTime(graph, timer); };
  const double one_core = run(Timer(1, 1));
  EXPECT_NEAR(run(Timer(1, 1.25)), 1.25 * one_core, 1e-9);
  EXPECT_NEAR(run(Timer(2, 1.25)), run(Timer(2, 1)), 1e-12);
}

// Communication on a shared host waits for cores while compute takes them
// all (ComputeCommSlowdown): with cores to spare, or free compute, nothing
// changes; with one core it can only lengthen the step.
TEST(Simulator, CommunicationSlowsWhileComputeFillsTheCores) {
  class Timer : public SharedHostTimer {
   public:
    Timer(double compute, double cores, double comm_slowdown)
        : SharedHostTimer(compute, 5e-4, cores, 1), comm_slowdown_(comm_slowdown) {}
    double ComputeCommSlowdown(int) const override { return comm_slowdown_; }

   private:
    double comm_slowdown_;
  };
  ExecutionGraph graph = Lower(MakeStrategy(1, 2, 2, 4, "1F1B"), 4, 8);
  auto run = [&](const InstructionTimer& timer) { return StepTime(graph, timer); };
  EXPECT_NEAR(run(Timer(1e-4, 8, 3)), run(Timer(1e-4, 8, 1)), 1e-12);
  EXPECT_NEAR(run(Timer(0, 1, 3)), run(Timer(0, 1, 1)), 1e-12);
  EXPECT_GT(run(Timer(1e-4, 1, 3)), run(Timer(1e-4, 1, 1)) + 1e-6);
}

// Both slowdowns of a shared host scale with the part of a call that moves
// bytes on its cores (CommCpuShare): a call that only waits out latency
// slows nothing and is slowed by nothing; a half share sits in between.
TEST(Simulator, SlowdownsScaleWithTheCpuShareOfCommunication) {
  class Timer : public SharedHostTimer {
   public:
    Timer(double cores, double share)
        : SharedHostTimer(1e-4, 5e-4, cores, 1.5), share_(share) {}
    double ComputeCommSlowdown(int) const override { return 3; }
    double CommCpuShare(const RankGraph&, const Instruction&, const CallStart&) const override {
      return share_;
    }

   private:
    double share_;
  };
  ExecutionGraph graph = Lower(MakeStrategy(1, 2, 2, 4, "1F1B"), 4, 8);
  auto run = [&](const InstructionTimer& timer) { return StepTime(graph, timer); };
  // Latency only: as on a host with cores to spare and no interference.
  const double free = run(SharedHostTimer(1e-4, 5e-4, 1, 1));
  EXPECT_NEAR(run(Timer(1, 0)), free, 1e-12);
  const double half = run(Timer(1, 0.5));
  const double whole = run(Timer(1, 1));
  EXPECT_GT(half, free + 1e-6);
  EXPECT_GT(whole, half + 1e-6);
}

// Where a pool's ranks outnumber its cores, each call takes its own CPU
// (CommCpuSeconds) from the pool's compute for its time, in place of
// CommSlowdown: nothing where every rank has a core, more with more CPU,
// and no more than the calls' CPU summed over the pool.
TEST(Simulator, CallsTakeTheirCpuFromComputeWhereRanksOutnumberCores) {
  class Timer : public SharedHostTimer {
   public:
    Timer(double cores, double slowdown, double cpu)
        : SharedHostTimer(1e-4, 5e-4, cores, slowdown), cpu_(cpu) {}
    double CommCpuSeconds(const RankGraph&, const Instruction& ins) const override {
      return ins.communicates() ? cpu_ : 0;
    }

   private:
    double cpu_;
  };
  ExecutionGraph graph = Lower(MakeStrategy(1, 2, 2, 4, "1F1B"), 4, 8);  // 4 ranks
  auto run = [&](const InstructionTimer& timer) { return StepTime(graph, timer); };
  EXPECT_NEAR(run(Timer(4, 1, 5e-4)), run(Timer(4, 1, 0)), 1e-12);
  const double none = run(Timer(1, 1, 0));
  const double part = run(Timer(1, 1, 2e-4));
  const double whole = run(Timer(1, 1, 5e-4));
  EXPECT_GT(part, none + 1e-6);
  EXPECT_GT(whole, part + 1e-6);
  // CommSlowdown no longer applies to calls whose CPU is known...
  EXPECT_NEAR(run(Timer(1, 1.5, 2e-4)), part, 1e-12);
  // ... and still does to the others.
  EXPECT_GT(run(Timer(1, 1.5, 0)), none + 1e-6);
  int calls = 0;
  for (const RankGraph& rank : graph.ranks) {
    for (const Instruction& ins : rank.instructions()) calls += ins.communicates() ? 1 : 0;
  }
  EXPECT_LE(whole, none + calls * 5e-4);
}

// FixedTimer with each rank pinned to a core of its own.
class PinnedTimer : public FixedSharedCoreTimer {
 public:
  PinnedTimer(double compute, double comm) : FixedSharedCoreTimer(compute, comm) {}
  int CorePool(const RankGraph& g) const override { return g.rank; }
};

// At each call the timer learns whether compute runs on every party's core
// and for how long yet: never where cores are not modelled; with a core per
// rank, a forward all-reduce that calc waits for finds the cores idle, and
// one beside compute finds it running for no longer than an op takes, or
// with a horizon, for the ops that follow it without a wait.
TEST(Simulator, CallsLearnHowLongComputeGoesOnOnTheirCores) {
  class Recording : public PinnedTimer {
   public:
    explicit Recording(bool pinned, double horizon = 0)
        : PinnedTimer(1e-4, 2e-4), pinned_(pinned), horizon_(horizon) {}
    int CorePool(const RankGraph& g) const override { return pinned_ ? g.rank : -1; }
    double CoreRunHorizon() const override { return horizon_; }
    double CommSeconds(const RankGraph& g, const Instruction& ins,
                       const CallStart& call) const override {
      if (call.cores_busy_for < 0) {
        ++idle_;
      } else {
        ++busy_;
        least_ = std::min(least_, call.cores_busy_for);
        most_ = std::max(most_, call.cores_busy_for);
      }
      return Seconds(g, ins);
    }
    bool pinned_;
    double horizon_;
    mutable int idle_ = 0, busy_ = 0;
    mutable double least_ = 1, most_ = -1;
  };
  ExecutionGraph graph = Lower(MakeStrategy(1, 2, 2, 4, "1F1B-overlap"), 4);
  auto run = [&](Recording& timer) {
    SimulationOptions o;
    o.timer = &timer;
    ASSERT_TRUE(Simulate(graph, o).ok());
  };
  Recording unpooled(false), pinned(true);
  run(unpooled);
  EXPECT_EQ(unpooled.busy_, 0);
  EXPECT_GT(unpooled.idle_, 0);
  run(pinned);
  EXPECT_GT(pinned.idle_, 0);
  EXPECT_GT(pinned.busy_, 0);
  EXPECT_GE(pinned.least_, 0);
  EXPECT_LE(pinned.most_, 1e-4 + 1e-12);
  // With a horizon, the ops the calc thread runs next without waiting for
  // another stream count too: more than one op, and at most the op running,
  // the horizon and the op that crossed it.
  Recording ahead(true, 5e-4);
  run(ahead);
  EXPECT_EQ(ahead.busy_, pinned.busy_);
  EXPECT_GT(ahead.most_, 1e-4 + 1e-9);
  EXPECT_LE(ahead.most_, 1e-4 + 5e-4 + 1e-4 + 1e-12);
}

// A call learns whether another rank's call runs on a party's core pool as
// it starts, and how long the longest such goes on: four ranks on two
// cores (two to a pool) find such calls, exactly where the trace shows
// another rank of a party's pool in a call, and until that call's end;
// with a core per rank, or cores not modelled, never.
TEST(Simulator, CallsLearnWhetherAnotherRanksCallRunsOnTheirCores) {
  class Recording : public PinnedTimer {
   public:
    explicit Recording(int pools) : PinnedTimer(1e-4, 3e-4), pools_(pools) {}
    int CorePool(const RankGraph& g) const override { return pools_ > 0 ? g.rank % pools_ : -1; }
    double CommSeconds(const RankGraph& g, const Instruction& ins,
                       const CallStart& call) const override {
      told_[{g.rank, ins.id}] = call.beside_other_calls;
      told_for_[{g.rank, ins.id}] = call.other_calls_for;
      return Seconds(g, ins);
    }
    int pools_;
    mutable std::map<std::pair<int, int>, bool> told_;  // (rank, instruction)
    mutable std::map<std::pair<int, int>, double> told_for_;
  };
  const ExecutionGraph graph = Lower(MakeStrategy(1, 2, 2, 4, "1F1B"), 4);
  auto beside_calls = [](const Recording& timer) {
    int n = 0;
    for (const auto& [call, beside] : timer.told_) n += beside;
    return n;
  };
  Recording unpooled(0), own_core(4), shared(2);
  CallsOf(graph, unpooled);
  CallsOf(graph, own_core);
  EXPECT_EQ(beside_calls(unpooled), 0);
  EXPECT_EQ(beside_calls(own_core), 0);
  const std::vector<TraceEvent> trace = CallsOf(graph, shared);
  EXPECT_GT(beside_calls(shared), 0);
  std::vector<const TraceEvent*> calls;
  for (const TraceEvent& e : trace) calls.push_back(&e);
  int checked = 0;
  for (const TraceEvent* e : calls) {
    const std::vector<int> parties = PartiesOf(graph, *e);
    // Another rank of a party's pool in a call as e starts; calls that
    // start or end at that very instant are left out (their order is the
    // event queue's).
    bool beside = false, tie = false;
    int64_t until_ns = 0;
    for (int p : parties) {
      for (const TraceEvent* f : calls) {
        if (f->rank == p || f->rank % 2 != p % 2 || f == e) continue;
        tie |= f->start_ns == e->start_ns || f->end_ns == e->start_ns;
        if (f->start_ns < e->start_ns && e->start_ns < f->end_ns) {
          beside = true;
          until_ns = std::max(until_ns, f->end_ns - e->start_ns);
        }
      }
    }
    if (tie) continue;
    ++checked;
    const std::pair<int, int> key{e->rank, e->instruction};
    EXPECT_EQ(shared.told_.at(key), beside)
        << e->op << " #" << e->instruction << " on rank " << e->rank;
    // (The trace's nanoseconds are truncated.)
    EXPECT_NEAR(shared.told_for_.at(key), until_ns * 1e-9, 2e-9)
        << e->op << " #" << e->instruction << " on rank " << e->rank;
  }
  EXPECT_GT(checked, 0);
}

// A call that starts beside another rank's call on its cores slows that
// one too, for as long as they overlap: four ranks on two cores, calls
// twice as slow beside one another. A call no later call joined keeps its
// time; one that a single call joined ends later by half their overlap;
// every party of a call ends together. Communication whose end follows
// the pool's compute (on cores it never fills) ends just the same.
TEST(Simulator, ACallThatJoinsAnotherOnItsCoresSlowsIt) {
  constexpr double kCall = 3e-4;
  class Timer : public FixedSharedCoreTimer {
   public:
    Timer(double beside_slowdown, double comm_slowdown)
        : FixedSharedCoreTimer(1e-4, kCall),
          beside_(beside_slowdown),
          comm_slowdown_(comm_slowdown) {}
    int CorePool(const RankGraph& g) const override { return g.rank % 2; }
    double PoolCores(int) const override { return 8; }
    double ComputeCommSlowdown(int) const override { return comm_slowdown_; }
    double BesideCallsSlowdown(const RankGraph&, const Instruction&,
                               const CallStart&) const override {
      return beside_;
    }
    double beside_, comm_slowdown_;
  };
  const ExecutionGraph graph = Lower(MakeStrategy(1, 2, 2, 4, "1F1B"), 4);
  for (const TraceEvent& e : CallsOf(graph, Timer(1, 1))) {
    EXPECT_NEAR((e.end_ns - e.start_ns) * 1e-9, kCall, 2e-9) << e.op << " on rank " << e.rank;
  }
  const std::vector<TraceEvent> calls = CallsOf(graph, Timer(2, 1));
  int kept = 0, slowed = 0;
  for (const TraceEvent& f : calls) {
    const std::vector<int> parties = PartiesOf(graph, f);
    // The calls that started while f ran, on a rank sharing a party's
    // cores: by start and parties.
    std::set<std::pair<int64_t, std::vector<int>>> joiners;
    bool tie = false;
    for (const TraceEvent& e : calls) {
      const std::vector<int> others = PartiesOf(graph, e);
      if (others == parties && e.start_ns == f.start_ns) {
        // Another party of f's own call: they end together.
        EXPECT_NEAR(e.end_ns, f.end_ns, 1) << f.op << " on ranks " << f.rank << ", " << e.rank;
        continue;
      }
      bool shares = false;
      for (int p : parties) {
        for (int q : others) shares |= p != q && p % 2 == q % 2;
      }
      if (!shares) continue;
      tie |= e.start_ns == f.start_ns || e.start_ns == f.end_ns;
      if (f.start_ns < e.start_ns && e.start_ns < f.end_ns) joiners.emplace(e.start_ns, others);
    }
    if (tie || joiners.size() > 1) continue;
    const double seconds = (f.end_ns - f.start_ns) * 1e-9;
    if (joiners.empty()) {
      ++kept;
      EXPECT_NEAR(seconds, kCall, 2e-9) << f.op << " on rank " << f.rank;
    } else {
      ++slowed;
      // Both at half pace until f's end, which moves out by half that time.
      const double overlap = (f.start_ns - joiners.begin()->first) * 1e-9 + kCall;
      EXPECT_NEAR(seconds, kCall + overlap / 2, 3e-9) << f.op << " on rank " << f.rank;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(slowed, 0);
  const std::vector<TraceEvent> repriced = CallsOf(graph, Timer(2, 1.5));
  ASSERT_EQ(repriced.size(), calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_NEAR(repriced[i].end_ns, calls[i].end_ns, 1)
        << calls[i].op << " on rank " << calls[i].rank;
  }
}

}  // namespace
}  // namespace loom
