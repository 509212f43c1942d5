// Hand-built pipeline plans for the plan verifier's tests: stages of
// relu/add ops over [2, 8] activations, sends and recvs between them, and
// the jobs of the real schedules, so that each test breaks one thing.
#ifndef LOOM_UNITTESTS_PLAN_VERIFIER_TEST_UTIL_H_
#define LOOM_UNITTESTS_PLAN_VERIFIER_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "framework/op_builder.h"
#include "framework/op_registry.h"
#include "framework/shape_inference.h"
#include "scheduler/plan_verifier.h"
#include "scheduler/schedule.h"
#include "unittests/schedule_test_util.h"

namespace loom {

inline constexpr int64_t kBatch = 2;
inline constexpr int64_t kHidden = 8;
inline const TensorMeta kAct{proto::FP32, {kBatch, kHidden}};
inline const TensorMeta kBias{proto::FP32, {kHidden}};
inline const TensorMeta kLr{proto::FP32, {1}};

inline void Declare(Block& b, const std::string& name, const TensorMeta& meta,
                    bool persistable = false, bool data = false) {
  proto::VarDesc* v = b.AddVar(name);
  SetMeta(meta, v);
  v->set_persistable(persistable);
  v->set_is_data(data);
}

inline Op* Append(Block& b, const proto::OpDesc& desc) {
  StatusOr<Op*> op = AppendOpInferShapes(b, desc);
  CHECK(op.ok()) << op.status();
  return *op;
}

inline Op* Unary(Block& b, const std::string& type, const std::string& x, const std::string& out) {
  return Append(b, OpDescBuilder(type).Input("X", x).Output("Out", out));
}

inline Op* Binary(Block& b, const std::string& type, const std::string& x, const std::string& y,
                  const std::string& out) {
  return Append(b, OpDescBuilder(type).Input("X", x).Input("Y", y).Output("Out", out));
}

// Transfers sit on their own streams, as pipeline-split puts them: a Gloo
// send waits for its receiver, so a send on the calc stream would stall it.
inline Op* Send(Block& b, const std::string& x, int peer) {
  Op* op = Append(b, OpDescBuilder("send")
                         .Input("X", x)
                         .Attr("peer", peer)
                         .Attr("ring_id", static_cast<int32_t>(kPpRing)));
  op->annotations().set_stream(stream::kP2pSend);
  return op;
}

inline Op* Recv(Block& b, const std::string& out, int peer, const TensorMeta& meta = kAct) {
  Op* op = Append(b, OpDescBuilder("recv")
                         .Output("Out", out)
                         .Attr("peer", peer)
                         .Attr("ring_id", static_cast<int32_t>(kPpRing))
                         .Attr("out_shape", meta.shape)
                         .Attr("dtype", static_cast<int32_t>(meta.dtype)));
  op->annotations().set_stream(stream::kP2pRecv);
  return op;
}

inline Op* Allreduce(Block& b, const std::string& var, int ring) {
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
inline std::string Act(int s, int i) { return StrCat("act", s, ".", i); }
inline std::string Weight(int s) { return StrCat("w", s); }
inline std::string Bias(int s) { return StrCat("b", s); }
inline std::string Fwd(int i) { return StrCat("f", i); }

// Stage s forward: recv (or read the data), a chain of mul/add with the
// stage's parameters, then send (or make the loss). The last op records
// "fwd.done".
inline Program ForwardProgram(const PipelineOptions& o, int s) {
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
inline Program BackwardProgram(const PipelineOptions& o, int s) {
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
inline Program OptimizerProgram(int s, bool swapped = false) {
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

inline std::vector<Job> ScheduleJobs(const PipelineOptions& o, int stage) {
  StatusOr<const ScheduleInfo*> info = FindSchedule(o.schedule);
  CHECK(info.ok()) << info.status();
  StatusOr<std::vector<Job>> jobs = (*info)->fn(ScheduleParams{stage, o.pp, o.micro_batches, 1});
  CHECK(jobs.ok()) << jobs.status();
  return *jobs;
}

inline Plan BuildPlan(const PipelineOptions& o) {
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

inline Block& ProgramOf(Plan& plan, int rank, JobType type) {
  return MutableProgramSet(plan.ranks[rank]).programs.at({type, 0}).global_block();
}

// Jobs from text: "F0 B0 F1 B1 O" (the schedule tests' parser).
inline std::vector<Job> Jobs(const std::string& text) { return schedule_test::Parse(text); }

// Position of the first op of `type` in `block`.
inline int FirstOpIndex(const Block& block, const std::string& type) {
  int i = 0;
  for (Op* op : block.ops()) {
    if (op->type() == type) return i;
    ++i;
  }
  return -1;
}
inline Op* FirstOp(const Block& block, const std::string& type) {
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

}  // namespace loom

#endif  // LOOM_UNITTESTS_PLAN_VERIFIER_TEST_UTIL_H_
