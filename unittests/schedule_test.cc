// The pipeline schedules: golden job lists, the validator over a sweep of
// shapes, and a cross-stage simulation (no deadlock, makespan, peak memory).
// The parameter errors and the validator's own: job_list_test.cc.
#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "scheduler/schedule.h"
#include "unittests/schedule_test_util.h"

namespace loom {
namespace {

using schedule_test::Get;
using schedule_test::Jobs;
using schedule_test::Lists;
using schedule_test::Parse;

// ---------------------------------------------------------------------------
// Golden lists: pipeline.degree 4, 8 micro-batches (VPP: 2 chunks).

// GPipe; Paddle pipeline_fthenb.py: all forwards, then all backwards.
TEST(ScheduleGolden, FThenB) {
  const std::string all = "F0 F1 F2 F3 F4 F5 F6 F7 B0 B1 B2 B3 B4 B5 B6 B7 O";
  EXPECT_EQ(Lists("FThenB", 4, 8),
            (std::vector<std::string>{all, all, all, all}));
}

// Megatron forward_backward_pipelining_without_interleaving: p - s - 1
// warm-up forwards, (F, B) pairs, cool-down backwards. Paddle pipeline_1f1b.py
// gives the same lists.
TEST(ScheduleGolden, OneFOneB) {
  EXPECT_EQ(Lists("1F1B", 4, 8),
            (std::vector<std::string>{
                "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7 O",
                "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7 O",
                "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7 O",
                "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7 O",
            }));
}

// Paddle pipeline_eager_1f1b.py: 2 * (p - s) - 1 warm-up forwards, (B, F)
// pairs, cool-down backwards.
TEST(ScheduleGolden, Eager1F1B) {
  EXPECT_EQ(Lists("Eager1F1B", 4, 8),
            (std::vector<std::string>{
                "F0 F1 F2 F3 F4 F5 F6 B0 F7 B1 B2 B3 B4 B5 B6 B7 O",
                "F0 F1 F2 F3 F4 B0 F5 B1 F6 B2 F7 B3 B4 B5 B6 B7 O",
                "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7 O",
                "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7 O",
            }));
}

// Megatron forward_backward_pipelining_with_interleaving (schedule table
// with groups of p micro-batches; warm-up 2 * (p - s - 1) + (c - 1) * p);
// Paddle pipeline_vpp.py gives the same lists when m != p.
TEST(ScheduleGolden, VPP) {
  EXPECT_EQ(
      Lists("VPP", 4, 8, 2),
      (std::vector<std::string>{
          "F0.0 F1.0 F2.0 F3.0 F0.1 F1.1 F2.1 F3.1 F4.0 F5.0 F6.0 B0.1 F7.0 "
          "B1.1 F4.1 B2.1 F5.1 B3.1 F6.1 B0.0 F7.1 B1.0 B2.0 B3.0 B4.1 B5.1 "
          "B6.1 B7.1 B4.0 B5.0 B6.0 B7.0 O",
          "F0.0 F1.0 F2.0 F3.0 F0.1 F1.1 F2.1 F3.1 F4.0 B0.1 F5.0 B1.1 F6.0 "
          "B2.1 F7.0 B3.1 F4.1 B0.0 F5.1 B1.0 F6.1 B2.0 F7.1 B3.0 B4.1 B5.1 "
          "B6.1 B7.1 B4.0 B5.0 B6.0 B7.0 O",
          "F0.0 F1.0 F2.0 F3.0 F0.1 F1.1 F2.1 B0.1 F3.1 B1.1 F4.0 B2.1 F5.0 "
          "B3.1 F6.0 B0.0 F7.0 B1.0 F4.1 B2.0 F5.1 B3.0 F6.1 B4.1 F7.1 B5.1 "
          "B6.1 B7.1 B4.0 B5.0 B6.0 B7.0 O",
          "F0.0 F1.0 F2.0 F3.0 F0.1 B0.1 F1.1 B1.1 F2.1 B2.1 F3.1 B3.1 F4.0 "
          "B0.0 F5.0 B1.0 F6.0 B2.0 F7.0 B3.0 F4.1 B4.1 F5.1 B5.1 F6.1 B6.1 "
          "F7.1 B7.1 B4.0 B5.0 B6.0 B7.0 O",
      }));
}

// The paper's ZB-H1 (Qi et al., ICLR 2024, figure 3 top): 1F1B's order with
// every backward split, and w(j - s) right after b(j), so stage s has p - s - 1
// warm-up forwards, s (F, b) pairs, (F, b, w) groups, (b, w) cool-down pairs
// and s late W halves. Paddle's first pipeline_zero_bubble.py and
// Megatron-DeepSpeed's ZB-H1 with exact semantics give the same lists.
TEST(ScheduleGolden, ZBH1) {
  EXPECT_EQ(Lists("ZBH1", 4, 8),
            (std::vector<std::string>{
                "F0 F1 F2 F3 b0 w0 F4 b1 w1 F5 b2 w2 F6 b3 w3 F7 b4 w4 "
                "b5 w5 b6 w6 b7 w7 O",
                "F0 F1 F2 b0 F3 b1 w0 F4 b2 w1 F5 b3 w2 F6 b4 w3 F7 b5 w4 "
                "b6 w5 b7 w6 w7 O",
                "F0 F1 b0 F2 b1 F3 b2 w0 F4 b3 w1 F5 b4 w2 F6 b5 w3 F7 b6 w4 "
                "b7 w5 w6 w7 O",
                "F0 b0 F1 b1 F2 b2 F3 b3 w0 F4 b4 w1 F5 b5 w2 F6 b6 w3 F7 b7 "
                "w4 w5 w6 w7 O",
            }));
}

// ZB-V (schedule_zbv.cc): chunk 0 down the stages, chunk 1 back up. Stage
// s: 2(p - s) - 1 chunk-0 forwards, s (F.1, F.0) pairs, p - s chunk-1
// (F, b, w) triples, then chunk-0 and chunk-1 triples in turn (chunk 0's
// forward once one is left); s (b.0, b.1) pairs with their Ws held back, p - s
// chunk-0 (b, w) pairs, and the held-back Ws, chunk 1 first.
TEST(ScheduleGolden, ZBV) {
  EXPECT_EQ(
      Lists("ZBV", 4, 8, 2),
      (std::vector<std::string>{
          "F0.0 F1.0 F2.0 F3.0 F4.0 F5.0 F6.0 F0.1 b0.1 w0.1 F1.1 b1.1 w1.1 F2.1 b2.1 w2.1 "
          "F3.1 b3.1 w3.1 F7.0 b0.0 w0.0 F4.1 b4.1 w4.1 b1.0 w1.0 F5.1 b5.1 w5.1 b2.0 w2.0 "
          "F6.1 b6.1 w6.1 b3.0 w3.0 F7.1 b7.1 w7.1 b4.0 w4.0 b5.0 w5.0 b6.0 w6.0 b7.0 w7.0 O",
          "F0.0 F1.0 F2.0 F3.0 F4.0 F0.1 F5.0 F1.1 b0.1 w0.1 F2.1 b1.1 w1.1 F3.1 b2.1 w2.1 "
          "F6.0 b0.0 w0.0 F4.1 b3.1 w3.1 F7.0 b1.0 w1.0 F5.1 b4.1 w4.1 b2.0 w2.0 F6.1 b5.1 "
          "w5.1 b3.0 w3.0 F7.1 b6.1 w6.1 b4.0 b7.1 b5.0 w4.0 b6.0 w5.0 b7.0 w6.0 w7.1 w7.0 O",
          "F0.0 F1.0 F2.0 F0.1 F3.0 F1.1 F4.0 F2.1 b0.1 w0.1 F3.1 b1.1 w1.1 F5.0 b0.0 w0.0 "
          "F4.1 b2.1 w2.1 F6.0 b1.0 w1.0 F5.1 b3.1 w3.1 F7.0 b2.0 w2.0 F6.1 b4.1 w4.1 b3.0 "
          "w3.0 F7.1 b5.1 w5.1 b4.0 b6.1 b5.0 b7.1 b6.0 w4.0 b7.0 w5.0 w6.1 w7.1 w6.0 w7.0 O",
          "F0.0 F0.1 F1.0 F1.1 F2.0 F2.1 F3.0 F3.1 b0.1 w0.1 F4.0 b0.0 w0.0 F4.1 b1.1 w1.1 "
          "F5.0 b1.0 w1.0 F5.1 b2.1 w2.1 F6.0 b2.0 w2.0 F6.1 b3.1 w3.1 F7.0 b3.0 w3.0 F7.1 "
          "b4.1 w4.1 b4.0 b5.1 b5.0 b6.1 b6.0 b7.1 b7.0 w4.0 w5.1 w6.1 w7.1 w5.0 w6.0 w7.0 O",
      }));
}

// One stage: every schedule degenerates to forward, backward per micro-batch
// (ZBH1: forward, B, W) or all forwards then all backwards; VPP keeps its
// chunks.
// 1F1B-overlap (schedule_1f1b_overlap.cc): 2(p - s - 1) + 1 warm-up
// forwards, then each backward interleaved part by part with a forward;
// here the forward is cut into 3 parts and the backward into 2.
TEST(ScheduleGolden, OneFOneBOverlap) {
  std::vector<std::string> lists;
  for (int s = 0; s < 2; ++s) {
    ScheduleParams params{s, 2, 5, 1};
    params.forward_cuts = {4, 9};
    params.backward_cuts = {6};
    auto jobs = Get("1F1B-overlap").fn(params);
    ASSERT_TRUE(jobs.ok()) << jobs.status();
    EXPECT_TRUE(ValidateJobList(params, *jobs).ok()) << ValidateJobList(params, *jobs);
    lists.push_back(JobListToString(*jobs));
  }
  EXPECT_EQ(lists, (std::vector<std::string>{
                       "F0 F1 F2 F3#0 B0#0 F3#1 B0#1 F3#2 F4#0 B1#0 F4#1 B1#1 F4#2 B2 B3 B4 O",
                       "F0 F1#0 B0#0 F1#1 B0#1 F1#2 F2#0 B1#0 F2#1 B1#1 F2#2 F3#0 B2#0 F3#1 "
                       "B2#1 F3#2 F4#0 B3#0 F4#1 B3#1 F4#2 B4 O",
                   }));
  // Parts carry their op ranges; the last runs to the program's end.
  ScheduleParams params{1, 2, 5, 1};
  params.forward_cuts = {4, 9};
  auto jobs = Get("1F1B-overlap").fn(params).value();
  EXPECT_EQ(jobs[1].op_begin, 0);
  EXPECT_EQ(jobs[1].op_end, 4);
  EXPECT_EQ(jobs[3].op_begin, 4);
  EXPECT_EQ(jobs[3].op_end, 9);
  EXPECT_EQ(jobs[4].op_begin, 9);
  EXPECT_EQ(jobs[4].op_end, -1);
}

TEST(ScheduleGolden, SingleStage) {
  EXPECT_EQ(Lists("1F1B", 1, 3),
            (std::vector<std::string>{"F0 B0 F1 B1 F2 B2 O"}));
  EXPECT_EQ(Lists("Eager1F1B", 1, 3),
            (std::vector<std::string>{"F0 B0 F1 B1 F2 B2 O"}));
  EXPECT_EQ(Lists("ZBH1", 1, 3),
            (std::vector<std::string>{"F0 b0 w0 F1 b1 w1 F2 b2 w2 O"}));
  EXPECT_EQ(
      Lists("VPP", 1, 2, 2),
      (std::vector<std::string>{"F0.0 F0.1 B0.1 F1.0 B0.0 F1.1 B1.1 B1.0 O"}));
  EXPECT_EQ(Lists("ZBV", 1, 2, 2),
            (std::vector<std::string>{
                "F0.0 F0.1 b0.1 w0.1 F1.0 b0.0 w0.0 F1.1 b1.1 w1.1 b1.0 w1.0 O"}));
}

// ---------------------------------------------------------------------------
// The table.

TEST(ScheduleTable, NamesAndFlags) {
  std::vector<std::string> names;
  for (const ScheduleInfo& s : Schedules()) {
    names.push_back(s.name);
    EXPECT_NE(s.fn, nullptr) << s.name;
    EXPECT_NE(std::string(s.summary), "") << s.name;
    EXPECT_EQ(s.splits_backward, names.back() == "ZBH1" || names.back() == "ZBV") << s.name;
    EXPECT_EQ(s.uses_chunks, names.back() == "VPP" || names.back() == "ZBV") << s.name;
    EXPECT_EQ(s.splits_jobs, names.back() == "1F1B-overlap") << s.name;
    EXPECT_EQ(s.v_shape, names.back() == "ZBV") << s.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"FThenB", "1F1B", "Eager1F1B", "VPP", "ZBH1",
                                             "1F1B-overlap", "ZBV"}));
  auto unknown = FindSchedule("2F2B");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(unknown.status().message(),
            "unknown schedule '2F2B' (known: FThenB, 1F1B, Eager1F1B, VPP, "
            "ZBH1, 1F1B-overlap, ZBV)");
}

// ---------------------------------------------------------------------------
// Shapes each schedule accepts, as its doc comment states them.

bool Accepts(const std::string& name, int p, int m, int c) {
  if (name == "VPP") return c >= 2 && m % p == 0;
  if (name == "ZBV") return c == 2 && m >= 2 * p - 1;
  if (c != 1) return false;
  if (name == "FThenB") return m >= 1;
  if (name == "1F1B" || name == "ZBH1" || name == "1F1B-overlap") return m >= p;
  if (name == "Eager1F1B") return m >= 2 * p - 1;
  LOG(FATAL) << "no rule for " << name;
  return false;
}

struct Shape {
  int stages, micro_batches, chunks;
};

// The valid shapes of the sweep: 1..8 stages, up to 3 * stages + 2
// micro-batches, chunks 2..3 for VPP and ZBV (which takes only 2).
std::vector<Shape> ValidShapes(const std::string& name) {
  std::vector<Shape> out;
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 3 * p + 2; ++m) {
      for (int c : Get(name).uses_chunks ? std::vector<int>{2, 3} : std::vector<int>{1}) {
        if (Accepts(name, p, m, c)) out.push_back({p, m, c});
      }
    }
  }
  return out;
}

// Each schedule accepts exactly the shapes its doc comment promises, on
// every stage; 1..3 chunks are tried on all of them.
TEST(ScheduleSweep, AcceptsExactlyTheDocumentedShapes) {
  for (const ScheduleInfo& s : Schedules()) {
    for (int p = 1; p <= 8; ++p) {
      for (int m = 1; m <= 3 * p + 2; ++m) {
        for (int c = 1; c <= 3; ++c) {
          for (int stage = 0; stage < p; ++stage) {
            auto jobs = s.fn(ScheduleParams{stage, p, m, c});
            EXPECT_EQ(jobs.ok(), Accepts(s.name, p, m, c))
                << s.name << " stage " << stage << " of " << p << ", " << m
                << " micro-batches, " << c << " chunks: " << jobs.status();
            if (!jobs.ok()) {
              EXPECT_EQ(jobs.status().code(), StatusCode::kInvalidArgument);
            }
          }
        }
      }
    }
  }
}

TEST(ScheduleSweep, ValidatorAcceptsEveryList) {
  int lists = 0;
  for (const ScheduleInfo& s : Schedules()) {
    for (const Shape& sh : ValidShapes(s.name)) {
      for (int stage = 0; stage < sh.stages; ++stage) {
        const ScheduleParams params{stage, sh.stages, sh.micro_batches,
                                    sh.chunks};
        auto jobs = s.fn(params);
        ASSERT_TRUE(jobs.ok()) << s.name << ": " << jobs.status();
        EXPECT_TRUE(ValidateJobList(params, *jobs).ok())
            << s.name << ": " << ValidateJobList(params, *jobs) << "\n"
            << JobListToString(*jobs, sh.chunks > 1);
        ++lists;
      }
    }
  }
  EXPECT_GT(lists, 1000);
}

// ---------------------------------------------------------------------------
// Cross-stage simulation.

// Unit costs: forward 1, B half 1, W half 1, whole backward 2 (= B + W),
// optimizer 0. Communication is free.
int Cost(JobType type) {
  switch (type) {
    case JobType::kForward:
      return 1;
    case JobType::kBackward:
      return 2;
    case JobType::kBackwardB:
      return 1;
    case JobType::kBackwardW:
      return 1;
    case JobType::kOptimizer:
      return 0;
  }
  return 0;
}

struct Simulation {
  bool deadlock = false;
  int makespan = 0;       // step at which the last job ends
  std::vector<int> peak;  // per stage: most micro-batch chunks in flight
  // Per stage: when its first job starts, its last ends, and the steps it
  // computes.
  std::vector<int> first_start, last_end, busy;
  std::string stuck;      // on deadlock: each stage's waiting job
};

// Runs each stage's list as a sequential program, all stages in lockstep
// unit time steps. Chunk k of stage s is virtual stage v = k * stages + s,
// or with v_shape (ZBV) s for chunk 0 and 2 * stages - 1 - s for chunk 1.
// A forward needs the same micro-batch's forward on v - 1; a backward (whole
// or B half) needs its own forward and the input gradient from v + 1 (the
// last virtual stage: only its own forward); a W half needs its own B half.
// At each step, an idle stage starts its next job if all it needs has
// finished; if no stage is busy and none can start, the schedule deadlocks.
// "In flight" counts a micro-batch chunk from its forward to the end of its
// whole backward or W half (the activations it holds).
Simulation Simulate(const std::vector<std::vector<Job>>& lists, int chunks,
                    bool v_shape = false) {
  const int stages = lists.size();
  const int last = stages * chunks - 1;
  enum Event { kForwardDone, kInputGradDone };
  std::map<std::tuple<int, int, int>, int> finish;  // (event, mb, v) -> step
  auto done = [&](Event e, int mb, int v, int t) {
    auto it = finish.find({e, mb, v});
    return it != finish.end() && it->second <= t;
  };
  Simulation sim;
  sim.peak.assign(stages, 0);
  sim.first_start.assign(stages, -1);
  sim.last_end.assign(stages, 0);
  sim.busy.assign(stages, 0);
  std::vector<int> in_flight(stages, 0);
  std::vector<size_t> next(stages, 0);
  std::vector<int> busy_until(stages, 0);
  for (int t = 0;; ++t) {
    bool all_done = true;
    bool progress = false;
    for (int s = 0; s < stages; ++s) {
      if (next[s] == lists[s].size()) continue;
      all_done = false;
      if (busy_until[s] > t) {
        progress = true;
        continue;
      }
      const Job& j = lists[s][next[s]];
      const int mb = j.micro_batch;
      const int v = VirtualStageOf(s, j.chunk, stages, v_shape);
      bool ready = true;
      switch (j.type) {
        case JobType::kForward:
          ready = v == 0 || done(kForwardDone, mb, v - 1, t);
          break;
        case JobType::kBackward:
        case JobType::kBackwardB:
          ready = done(kForwardDone, mb, v, t) &&
                  (v == last || done(kInputGradDone, mb, v + 1, t));
          break;
        case JobType::kBackwardW:
          ready = done(kInputGradDone, mb, v, t);
          break;
        case JobType::kOptimizer:
          break;
      }
      if (!ready) continue;
      const int end = t + Cost(j.type);
      if (j.type == JobType::kForward) {
        finish[{kForwardDone, mb, v}] = end;
        sim.peak[s] = std::max(sim.peak[s], ++in_flight[s]);
      }
      if (j.type == JobType::kBackward || j.type == JobType::kBackwardB) {
        finish[{kInputGradDone, mb, v}] = end;
      }
      if (j.type == JobType::kBackward || j.type == JobType::kBackwardW) {
        --in_flight[s];
      }
      busy_until[s] = end;
      sim.makespan = std::max(sim.makespan, end);
      if (end > t) {
        if (sim.first_start[s] < 0) sim.first_start[s] = t;
        sim.last_end[s] = end;
        sim.busy[s] += end - t;
      }
      ++next[s];
      progress = true;
    }
    if (all_done) return sim;
    if (!progress) {
      sim.deadlock = true;
      for (int s = 0; s < stages; ++s) {
        if (next[s] == lists[s].size()) continue;
        sim.stuck += StrCat("stage ", s, " waits at ",
                            JobToString(lists[s][next[s]], chunks > 1), "; ");
      }
      return sim;
    }
  }
}

Simulation SimulateSchedule(const std::string& name, const Shape& sh) {
  std::vector<std::vector<Job>> lists;
  for (int s = 0; s < sh.stages; ++s) {
    lists.push_back(Jobs(name, s, sh.stages, sh.micro_batches, sh.chunks));
  }
  return Simulate(lists, sh.chunks, Get(name).v_shape);
}

// The simulator itself: a hand-timed case, and a deadlock it must report.
TEST(ScheduleSimulation, SimulatorTimesAndDetectsDeadlock) {
  // F0 on stage 0 [0,1), on stage 1 [1,2); B0 on stage 1 [2,4), stage 0 [4,6).
  Simulation ok = Simulate({Parse("F0 B0 O"), Parse("F0 B0 O")}, 1);
  EXPECT_FALSE(ok.deadlock);
  EXPECT_EQ(ok.makespan, 6);

  // Stage 0 waits for B0 from stage 1, which waits for F1 from stage 0.
  Simulation bad =
      Simulate({Parse("F0 B0 F1 B1 O"), Parse("F0 F1 B0 B1 O")}, 1);
  EXPECT_TRUE(bad.deadlock);
  EXPECT_EQ(bad.stuck, "stage 0 waits at B0; stage 1 waits at F1; ");

  // A chunked deadlock: chunk 1 of stage 0 needs chunk 0 of stage 1 first.
  Simulation chunked = Simulate(
      {Parse("F0.0 F0.1 B0.1 B0.0 O"), Parse("F0.1 F0.0 B0.1 B0.0 O")}, 2);
  EXPECT_TRUE(chunked.deadlock);
}

// Makespan in the unit costs above, p stages, m micro-batches, c chunks.
int ExpectedMakespan(const std::string& name, const Shape& sh) {
  const int p = sh.stages, m = sh.micro_batches, c = sh.chunks;
  const int t_fb = Cost(JobType::kForward) + Cost(JobType::kBackward);  // 3
  // The classic bubble: (m + p - 1) * (tF + tB) on every stage timeline.
  // 1F1B-overlap without cuts is whole jobs in its order; with its warm-up
  // it keeps 1F1B's makespan (the simulator test checks it with parts).
  if (name == "FThenB" || name == "1F1B" || name == "Eager1F1B" || name == "1F1B-overlap") {
    return (m + p - 1) * t_fb;
  }
  // Interleaving divides the bubble by c: (m * c + p - 1) chunk slots.
  if (name == "VPP") return (m * c + p - 1) * t_fb;
  // ZB-H1, the paper's table 2: the bubble drops from
  // (p - 1)(tF + tB + tW) to (p - 1)(tF + tB - tW), 3(p - 1) to p - 1 steps.
  if (name == "ZBH1") return 3 * m + p - 1;
  // ZB-V in chunk units (F = b = w = 1 a chunk): 6m of work on every stage,
  // each stage s starting at s and running without a gap (the next test).
  if (name == "ZBV") return 6 * m + p - 1;
  LOG(FATAL) << "no makespan for " << name;
  return 0;
}

TEST(ScheduleSimulation, NoDeadlockAndKnownMakespan) {
  for (const ScheduleInfo& s : Schedules()) {
    for (const Shape& sh : ValidShapes(s.name)) {
      Simulation sim = SimulateSchedule(s.name, sh);
      ASSERT_FALSE(sim.deadlock)
          << s.name << " " << sh.stages << "x" << sh.micro_batches << "x"
          << sh.chunks << ": " << sim.stuck;
      EXPECT_EQ(sim.makespan, ExpectedMakespan(s.name, sh))
          << s.name << " " << sh.stages << "x" << sh.micro_batches << "x"
          << sh.chunks;
    }
  }
}

// The figures quoted in the report, pipeline.degree 4 and 8 micro-batches.
TEST(ScheduleSimulation, MakespansAtFourStagesEightMicroBatches) {
  EXPECT_EQ(SimulateSchedule("FThenB", {4, 8, 1}).makespan, 33);
  EXPECT_EQ(SimulateSchedule("1F1B", {4, 8, 1}).makespan, 33);
  EXPECT_EQ(SimulateSchedule("Eager1F1B", {4, 8, 1}).makespan, 33);
  EXPECT_EQ(SimulateSchedule("VPP", {4, 8, 2}).makespan, 57);  // 48 work + 9
  EXPECT_EQ(SimulateSchedule("ZBH1", {4, 8, 1}).makespan, 27);
  EXPECT_EQ(SimulateSchedule("ZBV", {4, 8, 2}).makespan, 51);  // 48 work + 3
}

// The published ZB-V figure: at F = B = W, no bubble ("bubble rate 0", Qi et
// al.'s table of the V schedules, which count a stage's idle time from its
// first job). Stage s starts when the first forward reaches it, at step s,
// and then never waits: a parallelogram, so the only idle time of a step is
// the fill, p - 1 chunk-forwards on every stage (ZBH1 leaves p - 1 whole
// stage passes, twice as many chunk units; 1F1B 3(p - 1)).
TEST(ScheduleSimulation, ZBVRunsEveryStageWithoutAGap) {
  for (const Shape& sh : ValidShapes("ZBV")) {
    const Simulation sim = SimulateSchedule("ZBV", sh);
    ASSERT_FALSE(sim.deadlock) << sim.stuck;
    for (int s = 0; s < sh.stages; ++s) {
      SCOPED_TRACE(StrCat("stage ", s, " of ", sh.stages, "x", sh.micro_batches));
      EXPECT_EQ(sim.first_start[s], s);
      EXPECT_EQ(sim.busy[s], 6 * sh.micro_batches);
      EXPECT_EQ(sim.last_end[s] - sim.first_start[s], sim.busy[s]);
    }
  }
}

// Peak activations in flight per stage, from each schedule's definition.
TEST(ScheduleSimulation, PeakMicroBatchesInFlight) {
  for (const ScheduleInfo& s : Schedules()) {
    for (const Shape& sh : ValidShapes(s.name)) {
      const int p = sh.stages, m = sh.micro_batches, c = sh.chunks;
      Simulation sim = SimulateSchedule(s.name, sh);
      for (int st = 0; st < p; ++st) {
        int expected = 0;
        const std::string name = s.name;
        if (name == "FThenB") expected = m;
        if (name == "1F1B") expected = p - st;
        if (name == "Eager1F1B") expected = 2 * (p - st) - 1;
        // ZBH1: p on every stage ("all workers maintain the same number of
        // in-flight micro-batches"), 1F1B's worst case; see the next test
        // for how many of them hold full activations.
        if (name == "ZBH1") expected = p;
        // Its warm-up, plus the forward each backward is interleaved with.
        if (name == "1F1B-overlap") expected = std::min(m, 2 * (p - st));
        // Megatron: warm-up + 1 (its max_outstanding_backprops).
        if (name == "VPP") {
          expected = std::min(2 * (p - st - 1) + (c - 1) * p + 1, m * c);
        }
        // ZBV: 2p chunks, p micro-batches of the whole stage, on every
        // stage: the activations 1F1B holds on its first.
        if (name == "ZBV") expected = 2 * p;
        EXPECT_EQ(sim.peak[st], expected) << name << " stage " << st << " of "
                                          << sh.stages << "x" << m << "x" << c;
      }
    }
  }
}

// ZB-H1's memory bound (the paper's (p - i + 1) M_B + (i - 1) M_W for worker
// i = s + 1): of the p micro-batches in flight on stage s, at most p - s
// still await their B and so hold full activations, exactly 1F1B's
// in-flight count there; the rest hold only W's inputs. A property of each
// stage's order alone, so it is counted on the lists.
// 1F1B-overlap under pipeline.max_in_flight c: stage s holds at most
// max(c, p - s + 1) micro-batches, never deadlocks, and the bubble grows
// as the cap bites (the makespan never shrinks).
TEST(ScheduleSimulation, OverlapMaxInFlightCapsEveryStage) {
  for (int p : {1, 2, 4, 8}) {
    for (int m : {p, 2 * p, 3 * p + 1}) {
      int previous = 0;
      for (int c : {0, 2 * p, p + 2, p + 1, 3, 2}) {
        if (c == 1) continue;
        SCOPED_TRACE(StrCat("p=", p, " m=", m, " max_in_flight=", c));
        std::vector<std::vector<Job>> lists;
        for (int s = 0; s < p; ++s) {
          ScheduleParams params{s, p, m, 1};
          params.max_in_flight = c;
          auto jobs = Get("1F1B-overlap").fn(params);
          ASSERT_TRUE(jobs.ok()) << jobs.status();
          ASSERT_TRUE(ValidateJobList(params, *jobs).ok());
          lists.push_back(*jobs);
        }
        Simulation sim = Simulate(lists, 1);
        ASSERT_FALSE(sim.deadlock) << sim.stuck;
        for (int s = 0; s < p; ++s) {
          const int bound = std::min(m, c == 0 ? 2 * (p - s) : std::max(c, p - s + 1));
          EXPECT_LE(sim.peak[s], bound) << "stage " << s;
        }
        if (c != 0) {
          EXPECT_GE(sim.makespan, previous);
        }
        previous = sim.makespan;
      }
    }
  }
  ScheduleParams params{0, 4, 8, 1};
  params.max_in_flight = 1;
  EXPECT_EQ(Get("1F1B-overlap").fn(params).status().message(),
            "pipeline.max_in_flight (1) must be at least 2 for 1F1B-overlap (a backward and the "
            "forward beside it), or 0");
}

TEST(ScheduleSimulation, ZBH1FullActivationsMatch1F1B) {
  for (const Shape& sh : ValidShapes("ZBH1")) {
    const int p = sh.stages;
    for (int st = 0; st < p; ++st) {
      int awaiting_b = 0, peak = 0;
      for (const Job& j : Jobs("ZBH1", st, p, sh.micro_batches)) {
        if (j.type == JobType::kForward) peak = std::max(peak, ++awaiting_b);
        if (j.type == JobType::kBackwardB) --awaiting_b;
      }
      EXPECT_EQ(peak, p - st)
          << "stage " << st << " of " << p << "x" << sh.micro_batches;
    }
  }
}

}  // namespace
}  // namespace loom
