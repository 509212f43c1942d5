// The simulator on real plans: the textbook bubble of every schedule,
// rendezvous semantics, exposed communication, folding, memory (the trace:
// simulator_trace_test.cc).
#include "scheduler/simulator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <tuple>
#include <unordered_map>

#include "models/gpt.h"
#include "passes/planner.h"
#include "scheduler/schedule.h"
#include "unittests/simulator_test_util.h"

namespace loom {
namespace {

// Job-level costs: each job's whole cost sits on one compute instruction,
// the last before the job's first send (or its last), so a job's output
// leaves exactly its cost after its input arrived, as textbook pipelines
// assume. Communication takes `comm_seconds` per instruction.
class UniformJobTimer : public InstructionTimer {
 public:
  static constexpr double kForward = 1;
  static constexpr double kBackward = 2;  // b + w
  static constexpr double kBackwardB = 1;
  static constexpr double kBackwardW = 1;
  static constexpr double kOptimizer = 0;

  UniformJobTimer(const ExecutionGraph& graph, double comm_seconds)
      : comm_seconds_(comm_seconds) {
    for (const RankGraph& g : graph.ranks) {
      auto [it, fresh] = costly_.emplace(g.body.get(), std::vector<char>());
      if (!fresh) continue;
      std::vector<char>& costly = it->second;
      costly.assign(g.instructions().size(), 0);
      // Per job (all its parts): its last compute before its first send.
      std::map<std::tuple<JobType, int, int>, std::pair<int, bool>> chosen_sent;
      for (const Instruction& ins : g.instructions()) {
        auto& [chosen, sent] = chosen_sent.try_emplace(
            std::make_tuple(ins.job.type, ins.job.micro_batch, ins.job.chunk), -1, false)
            .first->second;
        if (ins.kind == InstructionKind::kSend) sent = true;
        if (ins.kind == InstructionKind::kCompute && !sent) chosen = ins.id;
      }
      for (const auto& [job, cs] : chosen_sent) {
        if (cs.first >= 0) costly[cs.first] = 1;
      }
    }
  }

  double Seconds(const RankGraph& g, const Instruction& ins) const override {
    if (ins.communicates()) return comm_seconds_;
    return costly_.at(g.body.get())[ins.id] ? JobCost(ins.job.type) : 0;
  }

  static double JobCost(JobType t) {
    switch (t) {
      case JobType::kForward: return kForward;
      case JobType::kBackward: return kBackward;
      case JobType::kBackwardB: return kBackwardB;
      case JobType::kBackwardW: return kBackwardW;
      case JobType::kOptimizer: return kOptimizer;
    }
    return 0;
  }

 private:
  double comm_seconds_;
  std::unordered_map<const RankGraphBody*, std::vector<char>> costly_;
};

// The published bubble fractions with F = b = w = 1 (B = b + w = 2) and
// free communication: (p-1)/(m+p-1) for FThenB, 1F1B and Eager1F1B; VPP
// with c chunks, per-chunk costs: (p-1)/(mc+p-1); ZB-H1, whose bubble is
// (p-1)(F+B-W) against 1F1B's (p-1)(F+B+W): (p-1)/(3m+p-1); ZB-V, per-chunk
// costs, none but the fill of p-1 chunk forwards: (p-1)/(6m+p-1).
// The tensor-parallel f (identity) is a view: it copies, allocates and
// costs nothing, runs on calc beside its consumer, and its output shares
// the viewed temporary, which lives until the last toucher of either.
TEST(Simulator, TensorParallelInputsEnterThroughViews) {
  ExecutionGraph graph = Lower(MakeStrategy(1, 2, 1, 1, "1F1B"), 2);
  for (const RankGraph& g : graph.ranks) {
    int views = 0, copies = 0;
    for (const Instruction& ins : g.instructions()) {
      if (ins.op_type != "identity" || ins.kind != InstructionKind::kCompute) continue;
      const OpWork& work = g.body->Work(ins);
      const bool view = work.bytes == 0 && work.flops == 0 && ins.allocs == 0;
      (view ? views : copies) += 1;
      EXPECT_EQ(g.streams()[ins.stream].name, "calc") << InstructionLocation(g, ins);
    }
    EXPECT_GT(views, 0) << "rank " << g.rank;
    EXPECT_EQ(copies, 0) << "rank " << g.rank;
    int shared = 0;
    for (const Temporary& t : g.body->temporaries) {
      for (int view : t.views) {
        const std::string& v = g.body->var_names[view];
        EXPECT_NE(v.find("@MP_IN"), std::string::npos) << v << " views "
                                                       << g.body->var_names[t.var];
        ++shared;
      }
    }
    EXPECT_EQ(shared, views) << "rank " << g.rank;
  }
}

TEST(Simulator, BubbleOfEveryScheduleIsTheTextbookFormula) {
  const int p = 4, m = 8;
  for (const ScheduleInfo& schedule : Schedules()) {
    SCOPED_TRACE(schedule.name);
    const int c = schedule.uses_chunks ? 2 : 1;
    // An overlap schedule needs tensor-parallel all-reduces (free here).
    const int mp = schedule.splits_jobs ? 2 : 1;
    ExecutionGraph graph = Lower(MakeStrategy(1, mp, p, m, schedule.name, c));
    UniformJobTimer timer(graph, 0);
    SimulationOptions o;
    o.timer = &timer;
    auto sim = Simulate(graph, o);
    ASSERT_TRUE(sim.ok()) << sim.status();
    double expected_bubble = 0, expected_step = 0;
    if (std::string(schedule.name) == "ZBH1") {
      expected_step = 3 * m + p - 1;
      expected_bubble = (p - 1.0) / (3 * m + p - 1);
    } else if (schedule.v_shape) {
      // ZB-V, per-chunk costs: no bubble but the fill (schedule_zbv.cc).
      expected_step = 6 * m + p - 1;
      expected_bubble = (p - 1.0) / (6 * m + p - 1);
    } else if (schedule.uses_chunks) {
      expected_step = 3 * (m * c + p - 1);
      expected_bubble = (p - 1.0) / (m * c + p - 1);
    } else {
      expected_step = 3 * (m + p - 1);
      expected_bubble = (p - 1.0) / (m + p - 1);
    }
    EXPECT_NEAR(sim->step_time_s, expected_step, 1e-9);
    EXPECT_NEAR(sim->bubble_fraction, expected_bubble, 1e-9);
    for (const RankMetrics& r : sim->ranks) {
      EXPECT_NEAR(r.bubble_fraction, expected_bubble, 1e-9) << "rank " << r.rank;
    }
    for (double e : sim->exposed_comm_s) EXPECT_EQ(e, 0);
  }
}

// Every member of a group starts a collective together: with equal
// durations, each call ends at the same time on every member.
TEST(Simulator, CollectivesStartWhenTheLastMemberArrives) {
  ExecutionGraph graph = Lower(MakeStrategy(2, 2, 2, 4, "1F1B"), 4);
  FixedTimer timer(1e-3, 5e-4);
  SimulationOptions o;
  o.timer = &timer;
  o.trace = true;
  auto sim = Simulate(graph, o);
  ASSERT_TRUE(sim.ok()) << sim.status();
  std::map<int, const RankGraph*> rank_graph;
  for (const RankGraph& g : graph.ranks) rank_graph[g.rank] = &g;
  // (ring, the group's first rank, call) -> end times on its members.
  std::map<std::tuple<int, int, int64_t>, std::vector<int64_t>> ends;
  for (const TraceEvent& e : sim->trace) {
    if (e.kind != InstructionKind::kCollective) continue;
    const RankGraph& g = *rank_graph.at(e.rank);
    const Instruction& ins = g.instructions().at(e.instruction);
    ends[{ins.ring, g.Group(ins).front(), ins.comm_seq}].push_back(e.end_ns);
  }
  ASSERT_GT(ends.size(), 0u);
  for (const auto& [key, times] : ends) {
    const auto& [ring, first, call] = key;
    const RankGraph& g = *rank_graph.at(first);
    EXPECT_EQ(times.size(), g.groups[ring].size());
    for (int64_t t : times) EXPECT_EQ(t, times.front()) << RingName(static_cast<RingId>(ring));
  }
}

// `graph` simulated with `timer`, its trace kept; an empty result, and a
// failure, where the simulation fails.
SimulationResult SimulateTraced(const ExecutionGraph& graph, const InstructionTimer& timer) {
  SimulationOptions o;
  o.timer = &timer;
  o.trace = true;
  auto sim = Simulate(graph, o);
  EXPECT_TRUE(sim.ok()) << sim.status();
  return sim.ok() ? *sim : SimulationResult();
}

// A send that returns once its bytes are handed over (Gloo over TCP) still
// starts with its recv, but its stream is free after the hand-over while
// the recv takes the transfer; no step gets longer for it.
TEST(Simulator, ASendThatHandsItsBytesOverFreesItsStreamBeforeTheRecvEnds) {
  constexpr double kCall = 5e-4, kHandOver = 2e-5;
  class HandingOver : public FixedTimer {
   public:
    HandingOver() : FixedTimer(1e-3, kCall) {}
    double SendHandOverSeconds(const RankGraph&, const Instruction&) const override {
      return kHandOver;
    }
  };
  const ExecutionGraph graph = Lower(MakeStrategy(1, 1, 2, 4, "VPP", 2), 4);
  const SimulationResult handing = SimulateTraced(graph, HandingOver());
  std::map<int, const RankGraph*> rank_graph;
  for (const RankGraph& g : graph.ranks) rank_graph[g.rank] = &g;
  // (sender, receiver, transfer) -> (send's start and end, recv's).
  std::map<std::tuple<int, int, int64_t>, std::pair<const TraceEvent*, const TraceEvent*>> pairs;
  for (const TraceEvent& e : handing.trace) {
    if (e.kind != InstructionKind::kSend && e.kind != InstructionKind::kRecv) continue;
    const RankGraph& g = *rank_graph.at(e.rank);
    const Instruction& ins = g.instructions().at(e.instruction);
    const bool send = e.kind == InstructionKind::kSend;
    auto& pair = pairs[{send ? e.rank : g.Peer(ins), send ? g.Peer(ins) : e.rank, ins.comm_seq}];
    (send ? pair.first : pair.second) = &e;
  }
  ASSERT_GT(pairs.size(), 0u);
  for (const auto& [key, pair] : pairs) {
    const auto& [send, recv] = pair;
    ASSERT_TRUE(send != nullptr && recv != nullptr);
    EXPECT_EQ(send->start_ns, recv->start_ns);
    EXPECT_NEAR((send->end_ns - send->start_ns) * 1e-9, kHandOver, 2e-9);
    EXPECT_NEAR((recv->end_ns - recv->start_ns) * 1e-9, kCall, 2e-9);
  }
  EXPECT_LE(handing.step_time_s,
            SimulateTraced(graph, FixedTimer(1e-3, kCall)).step_time_s + 1e-12);
}

// Where a link queues the bytes a send handed over (a shaped link's tc
// tbf), they hold the sender's link until their recv ends: a call that
// sends on it meanwhile comes after them, and one in flight takes the
// transfer's time longer, all its parties alike. Calls that meet no such
// bytes take their price, as every call does where links do not queue.
TEST(Simulator, BytesHandedOverOnAQueueingLinkHoldItUntilTheirRecvEnds) {
  constexpr double kCall = 5e-4, kHandOver = 2e-5;
  class Queueing : public FixedTimer {
   public:
    explicit Queueing(bool queues) : FixedTimer(1e-5, kCall), queues_(queues) {}
    double SendHandOverSeconds(const RankGraph&, const Instruction&) const override {
      return kHandOver;
    }
    bool LinkQueuesHandedOverBytes(const RankGraph&, const Instruction&) const override {
      return queues_;
    }

   private:
    bool queues_;
  };
  const ExecutionGraph graph = Lower(MakeStrategy(1, 2, 2, 4, "VPP", 2), 4);
  std::map<int, const RankGraph*> rank_graph;
  for (const RankGraph& g : graph.ranks) rank_graph[g.rank] = &g;
  const SimulationResult queued = SimulateTraced(graph, Queueing(true));
  // Each rank's link holds its sends' bytes from the send's start to the
  // recv's end.
  std::map<std::pair<int, int64_t>, int64_t> send_start;  // (sender, transfer)
  std::map<std::pair<int, int64_t>, int64_t> recv_end;
  for (const TraceEvent& e : queued.trace) {
    const Instruction& ins = rank_graph.at(e.rank)->instructions().at(e.instruction);
    if (e.kind == InstructionKind::kSend) send_start[{e.rank, ins.comm_seq}] = e.start_ns;
    if (e.kind == InstructionKind::kRecv) {
      recv_end[{rank_graph.at(e.rank)->Peer(ins), ins.comm_seq}] = e.end_ns;
    }
  }
  std::map<int, std::vector<std::pair<int64_t, int64_t>>> held;  // rank -> intervals
  for (const auto& [key, start] : send_start) held[key.first].emplace_back(start, recv_end.at(key));
  ASSERT_FALSE(held.empty());
  int met = 0, apart = 0;
  for (const TraceEvent& e : queued.trace) {
    if (e.kind != InstructionKind::kCollective) continue;
    const RankGraph& g = *rank_graph.at(e.rank);
    bool meets = false;
    for (int member : g.Group(g.instructions().at(e.instruction))) {
      for (const auto& [from, to] : held[member]) meets |= e.start_ns < to && e.end_ns > from;
    }
    const double seconds = (e.end_ns - e.start_ns) * 1e-9;
    if (meets) {
      EXPECT_GT(seconds, kCall + 1e-9) << "rank " << e.rank << " instruction " << e.instruction;
      ++met;
    } else {
      EXPECT_NEAR(seconds, kCall, 2e-9) << "rank " << e.rank << " instruction " << e.instruction;
      ++apart;
    }
  }
  EXPECT_GT(met, 0);
  EXPECT_GT(apart, 0);
  const SimulationResult alone = SimulateTraced(graph, Queueing(false));
  for (const TraceEvent& e : alone.trace) {
    if (e.kind == InstructionKind::kCollective) {
      EXPECT_NEAR((e.end_ns - e.start_ns) * 1e-9, kCall, 2e-9);
    }
  }
  EXPECT_GT(queued.step_time_s, alone.step_time_s);
}

// With free compute, nothing hides communication: the exposed mp time is
// every mp-ring call, one after another (the ring orders them). With free
// communication, nothing is exposed.
TEST(Simulator, ExposedCommunicationIsWhatComputeDoesNotCover) {
  ExecutionGraph graph = Lower(MakeStrategy(1, 2, 1, 2, "1F1B"), 2, 8);
  {
    FixedTimer timer(0, 1);
    SimulationOptions o;
    o.timer = &timer;
    auto sim = Simulate(graph, o);
    ASSERT_TRUE(sim.ok()) << sim.status();
    for (const RankMetrics& r : sim->ranks) {
      int calls = 0;
      const RankGraph& g = graph.ranks[r.rank];
      for (const Instruction& ins : g.instructions()) {
        calls += ins.kind == InstructionKind::kCollective && ins.ring == kMpRing;
      }
      ASSERT_GT(calls, 0);
      EXPECT_DOUBLE_EQ(r.exposed_comm_s[static_cast<int>(CommCategory::kMp)], calls);
      EXPECT_DOUBLE_EQ(r.step_time_s, calls);
      EXPECT_DOUBLE_EQ(r.bubble_fraction, 1.0);
    }
  }
  {
    FixedTimer timer(1, 0);
    SimulationOptions o;
    o.timer = &timer;
    auto sim = Simulate(graph, o);
    ASSERT_TRUE(sim.ok()) << sim.status();
    for (double e : sim->exposed_comm_s) EXPECT_EQ(e, 0);
    EXPECT_GT(sim->step_time_s, 0);
  }
}

// Ranks that differ only in dp share their programs, and so one lowered
// body; only their groups differ.
TEST(Simulator, DpReplicasShareTheirInstructions) {
  ExecutionGraph graph = Lower(MakeStrategy(4, 1, 2, 2, "1F1B"), 2);
  ASSERT_EQ(graph.ranks.size(), 8u);
  for (const RankGraph& g : graph.ranks) {
    const RankGraph& first =
        graph.ranks[graph.layout.Rank(RankCoords{0, g.coords.mp, g.coords.pp})];
    EXPECT_EQ(g.body.get(), first.body.get()) << "rank " << g.rank;
    EXPECT_EQ(g.groups[kDpRing], RingMembers(graph.layout, g.rank, kDpRing));
    EXPECT_EQ(g.groups[kDpRing].size(), 4u);
  }
}

// A folded simulation reports every figure the full one does, for every
// rank of the graph, having simulated `factor` times fewer instructions.
void ExpectFoldedLikeFull(const SimulationResult& folded, const SimulationResult& full,
                          int factor) {
  EXPECT_DOUBLE_EQ(folded.step_time_s, full.step_time_s);
  EXPECT_DOUBLE_EQ(folded.bubble_fraction, full.bubble_fraction);
  for (int c = 0; c < kNumCommCategories; ++c) {
    EXPECT_DOUBLE_EQ(folded.exposed_comm_s[c], full.exposed_comm_s[c]) << c;
  }
  ASSERT_EQ(folded.ranks.size(), full.ranks.size());
  for (size_t r = 0; r < full.ranks.size(); ++r) {
    EXPECT_EQ(folded.ranks[r].rank, full.ranks[r].rank);
    EXPECT_DOUBLE_EQ(folded.ranks[r].step_time_s, full.ranks[r].step_time_s);
    EXPECT_EQ(folded.ranks[r].peak_bytes(), full.ranks[r].peak_bytes());
  }
  EXPECT_EQ(folded.instructions * factor, full.instructions);
}

// Folding the data-parallel replicas into one changes no figure when they
// time alike.
TEST(Simulator, FoldingDataParallelReplicasKeepsEveryFigure) {
  ExecutionGraph graph = Lower(MakeStrategy(4, 2, 2, 4, "1F1B"), 4);
  FixedTimer timer(2e-4, 3e-4);
  SimulationOptions o;
  o.timer = &timer;
  auto full = Simulate(graph, o);
  o.fold_data_parallel = true;
  auto folded = Simulate(graph, o);
  ASSERT_TRUE(full.ok() && folded.ok());
  EXPECT_EQ(full->ranks_simulated, 16);
  EXPECT_EQ(folded->ranks_simulated, 4);
  ExpectFoldedLikeFull(*folded, *full, 4);
}

// Tensor-parallel peers planned as one (as the tuner and `loom simulate`
// plan for timing) fold into one as well, with the dp replicas, and no
// figure moves; peers planned apart keep their own timelines.
TEST(Simulator, FoldingTensorParallelPeersPlannedAsOneKeepsEveryFigure) {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 4;
  c.batch_size = 16;
  TrainingProgram tp = BuildGptTrainingProgram(c).value();
  PlanOptions shared = LocalPlanOptions();
  shared.share_tensor_parallel_ranks = true;
  const proto::Strategy strategy = MakeStrategy(2, 2, 2, 4, "1F1B");
  const ExecutionGraph graph =
      LowerPlan(PlanRanks(tp.main, tp.startup, strategy, {}, shared).value()).value();
  FixedTimer timer(2e-4, 3e-4);
  SimulationOptions o;
  o.timer = &timer;
  auto full = Simulate(graph, o);
  o.fold_data_parallel = true;
  o.fold_tensor_parallel = true;
  auto folded = Simulate(graph, o);
  ASSERT_TRUE(full.ok() && folded.ok()) << full.status() << folded.status();
  EXPECT_EQ(full->ranks_simulated, 8);
  EXPECT_EQ(folded->ranks_simulated, 2);
  ExpectFoldedLikeFull(*folded, *full, 4);

  // Planned rank by rank, the peers' bodies differ: only dp folds.
  const ExecutionGraph apart = Lower(strategy, 4, 16);
  auto dp_only = Simulate(apart, o);
  ASSERT_TRUE(dp_only.ok()) << dp_only.status();
  EXPECT_EQ(dp_only->ranks_simulated, 4);
}

// The timer learns how long a call's first party waited for its last: a
// receiver that posts early waits for its sender's forward; the tensor-
// parallel pair, running the same ops, arrives together. And how long the
// parties' links had idled: a rank's first call since the step began finds
// them idle for ever, later ones for the compute since its last call ended.
TEST(Simulator, CommunicationIsPricedKnowingHowLongItsPartiesWaitedAndIdled) {
  class Recording : public FixedTimer {
   public:
    Recording() : FixedTimer(1e-4, 2e-4) {}
    double CommSeconds(const RankGraph& g, const Instruction& ins,
                       const CallStart& call) const override {
      const bool mp = ins.kind == InstructionKind::kCollective && ins.ring == kMpRing;
      double& most = mp ? mp_ : ins.kind == InstructionKind::kRecv ? recv_ : other_;
      most = std::max(most, call.waited);
      if (mp) {
        infinite_idle_ += std::isinf(call.link_idle);
        if (std::isfinite(call.link_idle)) {
          least_idle_ = std::min(least_idle_, call.link_idle);
          most_idle_ = std::max(most_idle_, call.link_idle);
        }
      }
      return Seconds(g, ins);
    }
    mutable double mp_ = 0, recv_ = 0, other_ = 0;
    mutable int infinite_idle_ = 0;
    mutable double least_idle_ = 1e9, most_idle_ = -1;
  };
  ExecutionGraph graph = Lower(MakeStrategy(1, 2, 2, 4, "1F1B"), 4);
  Recording timer;
  SimulationOptions o;
  o.timer = &timer;
  ASSERT_TRUE(Simulate(graph, o).ok());
  EXPECT_GT(timer.recv_, 1e-4);
  EXPECT_EQ(timer.mp_, 0);
  // Stage 0's pair starts its step with an all-reduce on idle links;
  // stage 1's pair has received first (its link carried the recv).
  EXPECT_EQ(timer.infinite_idle_, 2);
  // Every later call: idle at least 0, at most a step (a few ms here); some
  // follow compute (at least one 1e-4 s op), none start beside another.
  EXPECT_GE(timer.least_idle_, 0);
  EXPECT_GE(timer.most_idle_, 1e-4);
  EXPECT_LT(timer.most_idle_, 1);
}

// What a call leaves its link (a shaper's credit, say) reaches the link's
// next call: every party's, the least over them; nothing while the link is
// busy, and nothing before a rank's first call.
constexpr double kLeftOnTheLink = 3e-3;

TEST(Simulator, ALinksNextCallStartsWithWhatItsLastLeft) {
  class Carrying : public FixedTimer {
   public:
    Carrying() : FixedTimer(1e-4, 2e-4) {}
    double CommSeconds(const RankGraph& g, const Instruction& ins,
                       const CallStart& call) const override {
      ++calls_;
      if (call.link_credit == kLeftOnTheLink) ++carried_;
      if (call.link_credit != kLeftOnTheLink && call.link_credit != 0) ++other_;
      return Seconds(g, ins);
    }
    double LinkCreditAfter(const RankGraph&, const Instruction&, const CallStart&) const override {
      return kLeftOnTheLink;
    }
    mutable int calls_ = 0, carried_ = 0, other_ = 0;
  };
  // One tensor-parallel pair: its all-reduces, one at a time on one stream.
  ExecutionGraph graph = Lower(MakeStrategy(1, 2, 1, 4, "1F1B"), 2);
  Carrying timer;
  SimulationOptions o;
  o.timer = &timer;
  ASSERT_TRUE(Simulate(graph, o).ok());
  ASSERT_GT(timer.calls_, 4);
  // Each party's first call finds nothing carried; every later one, what
  // the call before left.
  EXPECT_EQ(timer.carried_, timer.calls_ - 2);
  EXPECT_EQ(timer.other_, 0);
}

// Memory: parameters are counted once per rank (the tied embedding on both
// ends of the pipeline), and FThenB keeps every micro-batch's activations
// where 1F1B keeps p - s.
TEST(Simulator, PeakMemoryFollowsTheSchedule) {
  const int p = 4, m = 8;
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 8;
  c.batch_size = 16;
  std::map<std::string, std::vector<int64_t>> peak;  // schedule -> per stage
  for (const char* schedule : {"FThenB", "1F1B"}) {
    ExecutionGraph graph = Lower(MakeStrategy(1, 1, p, m, schedule));
    UniformJobTimer timer(graph, 0);
    SimulationOptions o;
    o.timer = &timer;
    auto sim = Simulate(graph, o);
    ASSERT_TRUE(sim.ok()) << sim.status();
    int64_t params = 0;
    for (const RankMetrics& r : sim->ranks) {
      params += r.persistent.parameters;
      EXPECT_GT(r.persistent.optimizer_state, 0);
      EXPECT_EQ(r.peak_bytes(), r.persistent.total() + r.peak_temporary_bytes);
      peak[schedule].push_back(r.peak_temporary_bytes);
    }
    EXPECT_EQ(params, (c.NumParameters() + c.vocab_size * c.hidden) * 4) << schedule;
  }
  // FThenB holds m micro-batches on every stage, 1F1B p - s: the ratio
  // grows toward the last stage.
  for (int s = 0; s < p; ++s) {
    EXPECT_GT(peak["FThenB"][s], peak["1F1B"][s]) << "stage " << s;
  }
  for (int s = 1; s < p - 1; ++s) {
    EXPECT_GT(static_cast<double>(peak["FThenB"][s]) / peak["1F1B"][s],
              static_cast<double>(peak["FThenB"][s - 1]) / peak["1F1B"][s - 1])
        << "stage " << s;
  }
}

}  // namespace
}  // namespace loom
