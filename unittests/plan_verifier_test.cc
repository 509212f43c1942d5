// The plan verifier over hand-built pipeline plans: valid plans under the
// real schedules, and one broken plan per check (deadlock, mismatched
// transfers, unmatched sends, events, data flow, diverging collectives,
// missing programs), plus a 512-rank plan that must verify in seconds.
#include "scheduler/plan_verifier.h"

#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "framework/op_builder.h"
#include "framework/op_registry.h"
#include "framework/shape_inference.h"
#include "scheduler/schedule.h"

namespace loom {
namespace {

constexpr int64_t kBatch = 2;
constexpr int64_t kHidden = 8;
const TensorMeta kAct{proto::FP32, {kBatch, kHidden}};
const TensorMeta kBias{proto::FP32, {kHidden}};
const TensorMeta kLr{proto::FP32, {1}};

void Declare(Block& b, const std::string& name, const TensorMeta& meta,
             bool persistable = false, bool data = false) {
  proto::VarDesc* v = b.AddVar(name);
  SetMeta(meta, v);
  v->set_persistable(persistable);
  v->set_is_data(data);
}

Op* Append(Block& b, const proto::OpDesc& desc) {
  StatusOr<Op*> op = AppendOpInferShapes(b, desc);
  CHECK(op.ok()) << op.status();
  return *op;
}

Op* Unary(Block& b, const std::string& type, const std::string& x,
          const std::string& out) {
  return Append(b, OpDescBuilder(type).Input("X", x).Output("Out", out));
}

Op* Binary(Block& b, const std::string& type, const std::string& x,
           const std::string& y, const std::string& out) {
  return Append(
      b, OpDescBuilder(type).Input("X", x).Input("Y", y).Output("Out", out));
}

// Transfers sit on their own streams, as pipeline-split puts them: a Gloo
// send waits for its receiver, so a send on the calc stream would stall it.
Op* Send(Block& b, const std::string& x, int peer) {
  Op* op = Append(b, OpDescBuilder("send")
                         .Input("X", x)
                         .Attr("peer", peer)
                         .Attr("ring_id", static_cast<int32_t>(kPpRing)));
  op->annotations().set_stream(stream::kP2pSend);
  return op;
}

Op* Recv(Block& b, const std::string& out, int peer,
         const TensorMeta& meta = kAct) {
  Op* op = Append(b, OpDescBuilder("recv")
                         .Output("Out", out)
                         .Attr("peer", peer)
                         .Attr("ring_id", static_cast<int32_t>(kPpRing))
                         .Attr("out_shape", meta.shape)
                         .Attr("dtype", static_cast<int32_t>(meta.dtype)));
  op->annotations().set_stream(stream::kP2pRecv);
  return op;
}

Op* Allreduce(Block& b, const std::string& var, int ring) {
  return Append(b, OpDescBuilder("allreduce")
                       .Input("X", var)
                       .Output("Out", var)
                       .Attr("ring_id", static_cast<int32_t>(ring)));
}

struct PipelineOptions {
  int pp = 2;
  int dp = 1;
  int micro_batches = 4;
  std::string schedule = "1F1B";
  int chain = 2;  // compute ops in the middle of each forward and backward
  int sends = 1;  // tensors sent across each stage boundary, each way
};

// The i-th tensor leaving stage s forward (its gradient travels back).
std::string Act(int s, int i) { return StrCat("act", s, ".", i); }
std::string Weight(int s) { return StrCat("w", s); }
std::string Bias(int s) { return StrCat("b", s); }
std::string Fwd(int i) { return StrCat("f", i); }

// Stage s forward: recv (or read the data), a chain of mul/add with the
// stage's parameters, then send (or make the loss). The last op records
// "fwd.done".
Program ForwardProgram(const PipelineOptions& o, int s) {
  Program p;
  Block& b = p.global_block();
  Declare(b, Weight(s), kAct, /*persistable=*/true);
  Declare(b, Bias(s), kBias, /*persistable=*/true);
  std::string h;
  if (s == 0) {
    Declare(b, "tokens", kAct, false, /*data=*/true);
    h = "in";
    Unary(b, "scale", "tokens", h);
  } else {
    for (int i = 0; i < o.sends; ++i) Recv(b, Act(s - 1, i), s - 1);
    h = Act(s - 1, 0);
    for (int i = 1; i < o.sends; ++i) {
      Binary(b, "elementwise_add", h, Act(s - 1, i), StrCat("in", i));
      h = StrCat("in", i);
    }
  }
  for (int i = 0; i < o.chain; ++i) {
    if (i % 2 == 0) {
      Binary(b, "elementwise_mul", h, Weight(s), Fwd(i));
    } else {
      Binary(b, "elementwise_add", h, Bias(s), Fwd(i));
    }
    h = Fwd(i);
  }
  Op* last = nullptr;
  if (s + 1 < o.pp) {
    for (int i = 0; i < o.sends; ++i) Unary(b, "scale", h, Act(s, i));
    for (int i = 0; i < o.sends; ++i) last = Send(b, Act(s, i), s + 1);
  } else {
    last = Unary(b, "scale", h, "loss");
  }
  last->annotations().add_record_events("fwd.done");
  return p;
}

// Stage s backward: recv the output gradients (or start from the loss), a
// chain reading the forward's activations, the parameter gradients, then
// send the input gradients. The first compute op waits on "fwd.done".
Program BackwardProgram(const PipelineOptions& o, int s) {
  Program p;
  Block& b = p.global_block();
  Declare(b, Bias(s), kBias, /*persistable=*/true);
  for (int i = 0; i < o.chain; ++i) Declare(b, Fwd(i), kAct);
  std::string g;
  Op* first = nullptr;
  if (s + 1 == o.pp) {
    Declare(b, "loss", kAct);
    g = "loss@GRAD";
    first = Unary(b, "scale", "loss", g);
  } else {
    for (int i = 0; i < o.sends; ++i) {
      Recv(b, GradVarName(Act(s, i)), s + 1);
    }
    g = GradVarName(Act(s, 0));
    for (int i = 1; i < o.sends; ++i) {
      Binary(b, "elementwise_add", g, GradVarName(Act(s, i)), StrCat("gin", i));
      g = StrCat("gin", i);
    }
  }
  for (int i = o.chain - 1; i >= 0; --i) {
    Op* op = Binary(b, "elementwise_mul", g, Fwd(i), StrCat("g", i));
    if (first == nullptr) first = op;
    g = StrCat("g", i);
  }
  if (first == nullptr) first = Unary(b, "scale", g, "g");
  first->annotations().add_wait_events("fwd.done");
  Unary(b, "scale", g, GradVarName(Weight(s)));
  Unary(b, "scale", Bias(s), GradVarName(Bias(s)));
  if (s > 0) {
    for (int i = 0; i < o.sends; ++i) {
      Unary(b, "scale", g, GradVarName(Act(s - 1, i)));
    }
    for (int i = 0; i < o.sends; ++i) {
      Send(b, GradVarName(Act(s - 1, i)), s - 1);
    }
  }
  return p;
}

// Stage s optimizer: allreduce the two gradients over dp (weight then bias,
// or bias then weight when `swapped`), then sgd. Each sgd waits on its
// allreduce's event.
Program OptimizerProgram(int s, bool swapped = false) {
  Program p;
  Block& b = p.global_block();
  Declare(b, Weight(s), kAct, true);
  Declare(b, Bias(s), kBias, true);
  Declare(b, GradVarName(Weight(s)), kAct);
  Declare(b, GradVarName(Bias(s)), kBias);
  Declare(b, "lr", kLr, true);
  std::vector<std::string> params = {Weight(s), Bias(s)};
  if (swapped) std::swap(params[0], params[1]);
  for (const std::string& param : params) {
    Op* ar = Allreduce(b, GradVarName(param), kDpRing);
    ar->annotations().set_stream(stream::kDp);
    ar->annotations().add_record_events(param + ".reduced");
  }
  for (const std::string& param : params) {
    Op* sgd = Append(b, OpDescBuilder("sgd")
                            .Input("Param", param)
                            .Input("Grad", GradVarName(param))
                            .Input("LearningRate", "lr")
                            .Output("ParamOut", param));
    sgd->annotations().add_wait_events(param + ".reduced");
  }
  return p;
}

std::vector<Job> ScheduleJobs(const PipelineOptions& o, int stage) {
  StatusOr<const ScheduleInfo*> info = FindSchedule(o.schedule);
  CHECK(info.ok()) << info.status();
  StatusOr<std::vector<Job>> jobs =
      (*info)->fn(ScheduleParams{stage, o.pp, o.micro_batches, 1});
  CHECK(jobs.ok()) << jobs.status();
  return *jobs;
}

Plan BuildPlan(const PipelineOptions& o) {
  RegisterAllOps();
  Plan plan;
  plan.layout = ParallelLayout{o.dp, 1, o.pp};
  std::vector<Program> fwd, bwd, opt;
  std::vector<std::vector<Job>> jobs;
  for (int s = 0; s < o.pp; ++s) {
    fwd.push_back(ForwardProgram(o, s));
    bwd.push_back(BackwardProgram(o, s));
    opt.push_back(OptimizerProgram(s));
    jobs.push_back(ScheduleJobs(o, s));
  }
  for (int r = 0; r < plan.layout.world_size(); ++r) {
    RankPlan rp;
    rp.rank = r;
    rp.coords = plan.layout.Coords(r);
    const int s = rp.coords.pp;
    rp.jobs = jobs[s];
    MutableProgramSet(rp).programs.emplace(JobProgramKey{JobType::kForward, 0}, fwd[s].Clone());
    MutableProgramSet(rp).programs.emplace(JobProgramKey{JobType::kBackward, 0}, bwd[s].Clone());
    MutableProgramSet(rp).programs.emplace(JobProgramKey{JobType::kOptimizer, 0}, opt[s].Clone());
    plan.ranks.push_back(std::move(rp));
  }
  return plan;
}

Block& ProgramOf(Plan& plan, int rank, JobType type) {
  return MutableProgramSet(plan.ranks[rank]).programs.at({type, 0}).global_block();
}

// Jobs from text: "F0 B0 F1 B1 O".
std::vector<Job> Jobs(const std::string& text) {
  std::vector<Job> jobs;
  std::istringstream in(text);
  std::string w;
  while (in >> w) {
    Job j;
    j.type = w[0] == 'F'   ? JobType::kForward
             : w[0] == 'B' ? JobType::kBackward
                           : JobType::kOptimizer;
    if (j.type != JobType::kOptimizer) j.micro_batch = std::stoi(w.substr(1));
    jobs.push_back(j);
  }
  return jobs;
}

// Position of the first op of `type` in `block`.
int FirstOpIndex(const Block& block, const std::string& type) {
  int i = 0;
  for (Op* op : block.ops()) {
    if (op->type() == type) return i;
    ++i;
  }
  return -1;
}
Op* FirstOp(const Block& block, const std::string& type) {
  for (Op* op : block.ops()) {
    if (op->type() == type) return op;
  }
  return nullptr;
}

#define EXPECT_ERROR_HAS(status, ...)                                      \
  do {                                                                     \
    const Status _st = (status);                                           \
    ASSERT_FALSE(_st.ok()) << "the plan was accepted";                     \
    for (const std::string& _part : std::vector<std::string>{__VA_ARGS__}) \
      EXPECT_NE(_st.message().find(_part), std::string::npos)              \
          << "missing '" << _part << "' in: " << _st.message();            \
  } while (0)

// ---------------------------------------------------------------------------
// Valid plans.

TEST(PlanVerifier, AcceptsTwoStagesUnderFThenBAnd1F1B) {
  for (const char* schedule : {"FThenB", "1F1B"}) {
    PipelineOptions o;
    o.schedule = schedule;
    Plan plan = BuildPlan(o);
    PlanVerifyStats stats;
    Status st = VerifyPlan(plan, &stats);
    EXPECT_TRUE(st.ok()) << schedule << ": " << st;
    // 4 micro-batches, one tensor each way.
    EXPECT_EQ(stats.transfers, 8) << schedule;
    // Two dp allreduces per rank, each its own group of one.
    EXPECT_EQ(stats.collectives, 4) << schedule;
    int64_t ops = 0;
    for (const RankPlan& rp : plan.ranks) {
      for (const Job& j : rp.jobs) {
        ops += rp.ProgramFor(j)->global_block().num_ops();
      }
    }
    EXPECT_EQ(stats.ops, ops) << schedule;
  }
}

TEST(PlanVerifier, AcceptsDeeperWiderPipelinesUnderEverySchedule) {
  for (const char* schedule : {"FThenB", "1F1B", "Eager1F1B"}) {
    PipelineOptions o;
    o.schedule = schedule;
    o.pp = 4;
    o.dp = 2;
    o.micro_batches = 8;  // Eager1F1B needs 2 * pp - 1
    o.chain = 5;
    o.sends = 3;
    Plan plan = BuildPlan(o);
    PlanVerifyStats stats;
    Status st = VerifyPlan(plan, &stats);
    EXPECT_TRUE(st.ok()) << schedule << ": " << st;
    // 2 dp pipelines x 3 boundaries x 8 micro-batches x 3 tensors x 2 ways.
    EXPECT_EQ(stats.transfers, 2 * 3 * 8 * 3 * 2) << schedule;
    // 4 dp groups of two ranks, two allreduces each.
    EXPECT_EQ(stats.collectives, 4 * 2) << schedule;
  }
}

// ---------------------------------------------------------------------------
// Deadlock.

TEST(PlanVerifier, RejectsASendRecvOrderThatDeadlocks) {
  PipelineOptions o;
  o.micro_batches = 2;
  Plan plan = BuildPlan(o);
  // Stage 0 waits for B0's gradient before it sends F1's activation; stage 1
  // runs both forwards before any backward, so it waits for that activation.
  plan.ranks[0].jobs = Jobs("F0 B0 F1 B1 O");
  plan.ranks[1].jobs = Jobs("F0 F1 B0 B1 O");
  EXPECT_ERROR_HAS(
      VerifyPlan(plan),
      "deadlock: rank 0 (dp=0 mp=0 pp=0), job 1 (B0), op 0 (recv) on stream "
      "p2p_recv waits for its send from rank 1; rank 1 (dp=0 mp=0 pp=1), job "
      "2 (B0), op 6 (send) on stream p2p_send waits for job 2 (B0), op 5 "
      "(scale) on stream calc; rank 1 (dp=0 mp=0 pp=1), job 1 (F1), op 1 "
      "(elementwise_mul) on stream calc waits for job 1 (F1), op 0 (recv) on "
      "stream p2p_recv");
}

TEST(PlanVerifier, RejectsACollectiveThatDeadlocksWithARecv) {
  PipelineOptions o;
  Plan plan = BuildPlan(o);
  // Both stages allreduce a parameter over the pp ring in the forward:
  // stage 0 before it sends, stage 1 after it receives.
  Block& f0 = ProgramOf(plan, 0, JobType::kForward);
  Block& f1 = ProgramOf(plan, 1, JobType::kForward);
  Declare(f0, "shared", kBias, true);
  Declare(f1, "shared", kBias, true);
  ASSERT_TRUE(
      InsertOpInferShapes(f0, f0.front(),
                          OpDescBuilder("allreduce")
                              .Input("X", "shared")
                              .Output("Out", "shared")
                              .Attr("ring_id", static_cast<int32_t>(kPpRing)))
          .ok());
  Allreduce(f1, "shared", kPpRing);
  EXPECT_ERROR_HAS(VerifyPlan(plan),
                   "deadlock: rank 0 (dp=0 mp=0 pp=0), job 0 (F0), op 0 "
                   "(allreduce) on stream calc waits in call 0 on ring pp for "
                   "rank 1 (1 of 2 ranks arrived); rank 1 (dp=0 mp=0 pp=1), "
                   "job 0 (F0), op 1 (elementwise_mul) on stream calc waits "
                   "for job 0 (F0), op 0 (recv) on stream p2p_recv");
}

// ---------------------------------------------------------------------------
// Transfers.

TEST(PlanVerifier, RejectsASendWhoseShapeDiffersFromTheRecv) {
  Plan plan = BuildPlan(PipelineOptions{});
  Op* recv = FirstOp(ProgramOf(plan, 1, JobType::kForward), "recv");
  recv->SetAttr<std::vector<int64_t>>("out_shape", {kBatch, kHidden + 1});
  const int send = FirstOpIndex(ProgramOf(plan, 0, JobType::kForward), "send");
  EXPECT_ERROR_HAS(VerifyPlan(plan),
                   StrCat("rank 0 (dp=0 mp=0 pp=0), job 0 (F0): op ", send,
                          " (send): sends var 'act0.0' (micro-batch 0, "
                          "fp32[2, 8]), but its matching recv"),
                   "rank 1 (dp=0 mp=0 pp=1), job 0 (F0): op 0 (recv), "
                   "receives 'act0.0' (micro-batch 0, fp32[2, 9]); they "
                   "differ in shape");
}

TEST(PlanVerifier, RejectsATransferWhoseVarNamesDiffer) {
  Plan plan = BuildPlan(PipelineOptions{});
  ASSERT_TRUE(
      ProgramOf(plan, 1, JobType::kForward).RenameVar("act0.0", "other").ok());
  EXPECT_ERROR_HAS(VerifyPlan(plan), "sends var 'act0.0'", "receives 'other'",
                   "differ in var");
}

TEST(PlanVerifier, RejectsASendThatIsNeverReceived) {
  Plan plan = BuildPlan(PipelineOptions{});
  Block& opt = ProgramOf(plan, 0, JobType::kOptimizer);
  const int index = static_cast<int>(opt.num_ops());
  Send(opt, "lr", 1);
  // 1F1B on stage 0 of 2 with 4 micro-batches: the optimizer is job 8.
  EXPECT_ERROR_HAS(VerifyPlan(plan),
                   StrCat("rank 0 (dp=0 mp=0 pp=0), job 8 (O): op ", index,
                          " (send): sends var 'lr' to rank 1 (dp=0 mp=0 "
                          "pp=1), which never receives it: rank 0 sends 5 "
                          "tensors to rank 1, which receives 4 from it"));
}

TEST(PlanVerifier, RejectsARecvWhoseSenderNeverSends) {
  Plan plan = BuildPlan(PipelineOptions{});
  Block& opt = ProgramOf(plan, 1, JobType::kOptimizer);
  Recv(opt, "extra", 0);
  EXPECT_ERROR_HAS(VerifyPlan(plan), "(recv): receives var 'extra' from rank 0",
                   "which never sends it: rank 0 sends 4 tensors to rank 1, "
                   "which receives 5 from it");
}

// ---------------------------------------------------------------------------
// Events.

TEST(PlanVerifier, RejectsAnEventNobodyRecords) {
  Plan plan = BuildPlan(PipelineOptions{});
  Block& bwd = ProgramOf(plan, 1, JobType::kBackward);
  bwd.back()->annotations().add_wait_events("never.recorded");
  // Stage 1 of 2 under 1F1B: F0 B0 ...; B0 is job 1.
  EXPECT_ERROR_HAS(
      VerifyPlan(plan),
      StrCat("rank 1 (dp=0 mp=0 pp=1), job 1 (B0): op ", bwd.num_ops() - 1,
             " (", bwd.back()->type(),
             "): waits on event 'never.recorded', which no op of this "
             "rank records in micro-batch 0 or in the optimizer job"));
}

TEST(PlanVerifier, RejectsAnOptimizerWaitOnAnUnrecordedEvent) {
  Plan plan = BuildPlan(PipelineOptions{});
  Block& opt = ProgramOf(plan, 0, JobType::kOptimizer);
  // The allreduce's record is the only one of this name; drop it.
  FirstOp(opt, "allreduce")->annotations().clear_record_events();
  EXPECT_ERROR_HAS(VerifyPlan(plan),
                   "job 8 (O): op 2 (sgd): waits on event "
                   "'w0.reduced', which no op of this rank "
                   "records");
}

// ---------------------------------------------------------------------------
// Data flow.

TEST(PlanVerifier, RejectsAReadOfAVarNobodyWrote) {
  Plan plan = BuildPlan(PipelineOptions{});
  Block& bwd = ProgramOf(plan, 1, JobType::kBackward);
  Declare(bwd, "ghost", kAct);
  const int index = static_cast<int>(bwd.num_ops());
  Unary(bwd, "scale", "ghost", "ghost.out");
  EXPECT_ERROR_HAS(
      VerifyPlan(plan),
      StrCat("rank 1 (dp=0 mp=0 pp=1), job 1 (B0): op ", index,
             " (scale): reads var 'ghost', which is not written earlier in "
             "the program, not persistable or data, and not written by an "
             "earlier job of micro-batch 0 on this rank"));
}

TEST(PlanVerifier, RejectsAForwardReadingWhatOnlyTheBackwardWrites) {
  Plan plan = BuildPlan(PipelineOptions{});
  // The forward of micro-batch m reads g0, which only B m writes, later.
  Block& fwd = ProgramOf(plan, 1, JobType::kForward);
  Declare(fwd, "g0", kAct);
  Unary(fwd, "scale", "g0", "uses.g0");
  EXPECT_ERROR_HAS(VerifyPlan(plan), "job 0 (F0)", "reads var 'g0'");
}

TEST(PlanVerifier, OptimizerReadsTheGradientsTheBackwardWrote) {
  // One stage: the optimizer (micro-batch 0) reads w0@GRAD, which the
  // backward jobs write (into one accumulator, whatever their micro-batch).
  PipelineOptions o;
  o.pp = 1;
  Plan plan = BuildPlan(o);
  Status st = VerifyPlan(plan);
  EXPECT_TRUE(st.ok()) << st;
  // With no backward writing it, the read fails.
  Block& bwd = ProgramOf(plan, 0, JobType::kBackward);
  ASSERT_TRUE(bwd.RenameVar("w0@GRAD", "w0@GRAD.local").ok());
  EXPECT_ERROR_HAS(VerifyPlan(plan),
                   "job 8 (O): op 0 (allreduce): reads var "
                   "'w0@GRAD'",
                   "or by a backward job on this rank");
}

// ---------------------------------------------------------------------------
// Collectives.

TEST(PlanVerifier, RejectsDpRanksAllreducingInDifferentOrders) {
  PipelineOptions o;
  o.dp = 2;
  Plan plan = BuildPlan(o);
  // Rank 1 is dp=1 of stage 0.
  ASSERT_EQ(plan.ranks[1].coords, (RankCoords{1, 0, 0}));
  MutableProgramSet(plan.ranks[1]).programs.at({JobType::kOptimizer, 0}) =
      OptimizerProgram(0, /*swapped=*/true);
  EXPECT_ERROR_HAS(VerifyPlan(plan),
                   "rank 0 (dp=0 mp=0 pp=0), job 8 (O): op 0 (allreduce): "
                   "collective 0 on ring dp (allreduce, micro-batch 0, inputs "
                   "[fp32[2, 8]], reduce_op sum) does not match rank 1 (dp=1 "
                   "mp=0 pp=0), job 8 (O): op 0 (allreduce) (allreduce, "
                   "micro-batch 0, inputs [fp32[8]], reduce_op sum)");
}

TEST(PlanVerifier, RejectsADpRankWithAnExtraCollective) {
  PipelineOptions o;
  o.dp = 2;
  Plan plan = BuildPlan(o);
  Allreduce(ProgramOf(plan, 1, JobType::kOptimizer), "lr", kDpRing);
  EXPECT_ERROR_HAS(VerifyPlan(plan),
                   "rank 1 (dp=1 mp=0 pp=0), job 8 (O): op 4 (allreduce): "
                   "collective 2 on ring dp has no counterpart on rank 0",
                   "rank 0 (dp=0 mp=0 pp=0) issues 2 collectives on ring dp "
                   "but rank 1 (dp=1 mp=0 pp=0) issues 3");
}

TEST(PlanVerifier, RejectsAnUnknownRing) {
  Plan plan = BuildPlan(PipelineOptions{});
  FirstOp(ProgramOf(plan, 0, JobType::kOptimizer), "allreduce")
      ->SetAttr<int32_t>("ring_id", 0);
  EXPECT_ERROR_HAS(VerifyPlan(plan),
                   "rank 0 (dp=0 mp=0 pp=0), job 8 (O): op 0 (allreduce): "
                   "ring_id 0 is not a known ring");
}

// ---------------------------------------------------------------------------
// Jobs and programs.

TEST(PlanVerifier, RejectsAJobWithoutAProgram) {
  Plan plan = BuildPlan(PipelineOptions{});
  MutableProgramSet(plan.ranks[1]).programs.erase({JobType::kBackward, 0});
  EXPECT_ERROR_HAS(VerifyPlan(plan),
                   "rank 1 (dp=0 mp=0 pp=1), job 1 (B0): the rank has no "
                   "backward program");
}

TEST(PlanVerifier, RejectsAnInvalidJobList) {
  Plan plan = BuildPlan(PipelineOptions{});
  plan.ranks[0].jobs.pop_back();  // the optimizer
  EXPECT_ERROR_HAS(VerifyPlan(plan),
                   "rank 0 (dp=0 mp=0 pp=0): no optimizer job");
  plan = BuildPlan(PipelineOptions{});
  plan.ranks[1].jobs = Jobs("F0 B1 F1 B0 O");
  EXPECT_ERROR_HAS(VerifyPlan(plan),
                   "rank 1 (dp=0 mp=0 pp=1), job 1 (B1): "
                   "runs before its forward");
}

TEST(PlanVerifier, RejectsAPlanThatDoesNotFitItsLayout) {
  Plan plan = BuildPlan(PipelineOptions{});
  plan.ranks.pop_back();
  EXPECT_ERROR_HAS(VerifyPlan(plan),
                   "plan has 1 ranks but layout dp=1 mp=1 "
                   "pp=2 needs 2");
}

TEST(PlanVerifier, RejectsAPeerOutsideThePipeline) {
  Plan plan = BuildPlan(PipelineOptions{});
  FirstOp(ProgramOf(plan, 0, JobType::kForward), "send")
      ->SetAttr<int32_t>("peer", 2);
  EXPECT_ERROR_HAS(VerifyPlan(plan), "(send): peer 2 is not a pipeline stage");
}

// ---------------------------------------------------------------------------
// Scale: 512 ranks (pp=8, dp=64), ~200 ops per program, 8 micro-batches.

TEST(PlanVerifier, VerifiesA512RankPlanInSeconds) {
  PipelineOptions o;
  o.pp = 8;
  o.dp = 64;
  o.micro_batches = 8;
  o.schedule = "1F1B";
  o.sends = 4;
  o.chain = 186;  // a middle stage's forward: 4 recv + 3 add + 186 + 4 + 4
  Plan plan = BuildPlan(o);
  ASSERT_EQ(plan.ranks.size(), 512u);
  const size_t fwd_ops = ProgramOf(plan, 64, JobType::kForward).num_ops();
  EXPECT_GE(fwd_ops, 195u);
  const auto start = std::chrono::steady_clock::now();
  PlanVerifyStats stats;
  Status st = VerifyPlan(plan, &stats);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  ASSERT_TRUE(st.ok()) << st;
  std::cout << "[ timing   ] 512 ranks, " << stats.ops << " ops, "
            << stats.transfers << " transfers, " << stats.collectives
            << " collectives verified in " << seconds << " s\n";
  EXPECT_EQ(stats.transfers, 64 * 7 * 8 * 4 * 2);
  EXPECT_LT(seconds, 10.0);

  // The same plan with one stage's jobs reordered into a deadlock is caught
  // as fast.
  plan.ranks[0].jobs =
      Jobs("F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7 O");
  const auto start2 = std::chrono::steady_clock::now();
  EXPECT_ERROR_HAS(VerifyPlan(plan), "deadlock: rank 0 (dp=0 mp=0 pp=0)");
  const double seconds2 =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start2)
          .count();
  std::cout << "[ timing   ] deadlocked 512-rank plan rejected in " << seconds2
            << " s\n";
  EXPECT_LT(seconds2, 10.0);
}

}  // namespace
}  // namespace loom
